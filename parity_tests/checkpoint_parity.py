"""Parity of a user's own TF1 Tacotron-2 checkpoint: the TF1 reference graph, Keras and torch on its real weights.

``speechblocks parity --checkpoint CKPT`` runs :func:`run_checkpoint_parity`: it reads every variable of
``Tacotron_model/inference/`` (the hparams inferred from the shapes, as ``Tacotron2.from_tf1_checkpoint`` does),
then runs three implementations on exactly those weights:

* the TF1 legacy reference (``parity_tests/legacy``, a ``TF_USE_LEGACY_KERAS=1`` subprocess; every graph of the
  run is built in one subprocess, the weights reach it as one ``.npz`` file and replace the random fill -- every
  variable of each graph must be found there);
* :class:`tf_layers.Tacotron2` and :class:`torch_layers.Tacotron2`, built from the same weights.

Rows (:class:`parity_tests.report.Row`), for each of ``TF1->Keras``, ``TF1->torch`` and ``Keras<->torch``:

* every block of the model with its real weights, on seeded random inputs of the model's sizes: encoder
  convolutions (inputs: the checkpoint's own embeddings of random ids), encoder LSTM (masked lengths), pre-net
  (dropout on, as in the original, with the keep-masks the TF1 graph drew injected into Keras and torch), decoder
  LSTM (a few steps from the zero state, and one step from random states), location-sensitive attention (a few
  steps), frame and stop projections (one decoder step), postnet, postnet projection and, with
  ``predict_linear`` (Rayhane), the post-CBHG and its linear projection;
* the whole model in inference mode with injected pre-net keep-masks: teacher forced (GTA) over ``steps``
  decoder steps, and free running for exactly ``steps`` steps -- the stop-projection bias is lowered by
  :data:`STOP_BIAS_SHIFT` in all three implementations so the stop rule cannot end the loop early (the GTA rows
  compare the real stop probabilities), and a row checks that all ran the same number of steps. Outputs
  ``decoder_outputs``, ``mel_outputs``, ``stop_token_prediction``, ``alignments`` (and ``linear_outputs``).

Without TensorFlow (``skip_keras``, which needs ``skip_legacy``: ``speechblocks parity --checkpoint CKPT
--skip-legacy`` where ``import tensorflow`` fails) nothing can be compared with Keras or TF1; the rows are then the
torch side's own checks, named so that none reads as a comparison with another framework: the weights the torch
model loaded equal the checkpoint's (``checkpoint->torch``), every output of the GTA and free-running runs is finite
(``torch finite``) and the same on a second run (``torch rerun``), and the model ``speechblocks migrate --to torch``
writes reloads to the same outputs (``torch<->migrated .pt``).

The torch side runs on ``device`` (``speechblocks parity --checkpoint CKPT --device cuda``), in float32 and on
CUDA with TF32 off (:func:`exact_float32`); its inputs are made in numpy and copied there, its outputs copied back
to be compared. Keras and the TF1 reference keep TensorFlow's own placement.

Tolerances are the parity suite's (docs/ARCHITECTURE.md, tolerances), as the block and whole-model cases use them: 1e-5
for the blocks (relative to ``max(1, max |ref|)`` where the block's case compares relative), 1e-4 for the encoder LSTM,
the CBHG and the whole model.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import importlib.util
import os
import tempfile
import time
from collections.abc import Callable, Mapping

import numpy as np

from speechblocks.parity.report import rows_to_json as shared_rows_to_json

from .cases._common import FLOAT32_TOL, LONG_RECURRENCE_TOL, to_numpy, torch_tensor
from .report import Row, compare

__all__ = ["run_checkpoint_parity", "rows_to_json", "LegacyReferenceUnavailable", "legacy_reference_available",
           "STOP_BIAS_SHIFT", "TORCH_SIDE_CHECKS", "exact_float32"]

MODEL_SCOPE = "Tacotron_model/inference"
STOP_BIAS = "decoder/stop_token_projection/projection_stop_token_projection/bias"
#: added to the stop-projection bias for the free-running rows (all three implementations): the loop then runs
#: exactly ``steps`` steps whatever the random text makes the real stop token say
STOP_BIAS_SHIFT = -40.0
T_IN = 16  # symbols per input row (the other rows are shorter: masked lengths)
BLOCK_STEPS = 5  # decoder steps of the decoder-LSTM and attention block rows
BLOCK_FRAMES = 24  # frames of the postnet / CBHG block rows
COMPARISONS = ("TF1->Keras", "TF1->torch", "Keras<->torch")
#: the rows of the torch side alone (``skip_keras``): no other framework is compared
TORCH_SIDE_CHECKS = ("checkpoint->torch", "torch finite", "torch rerun", "torch<->migrated .pt")
WHOLE_MODEL = "Tacotron2"


class LegacyReferenceUnavailable(RuntimeError):
    """The TF1 legacy reference cannot run here: ``tf_keras`` (the ``legacy`` extra) is not installed."""


def legacy_reference_available() -> bool:
    """True when the TF1 legacy reference can run: ``tf_keras`` (the ``legacy`` extra) is importable."""
    return importlib.util.find_spec("tf_keras") is not None


def rows_to_json(rows: list[Row]) -> str:
    """The rows as a JSON list (``--json``): :func:`speechblocks.parity.report.rows_to_json`.

    Args:
        rows: rows of :func:`run_checkpoint_parity` (or any parity rows).

    Returns:
        a JSON array of objects ``{"block", "comparison", "output", "max_abs", "tol", "passed", "note"}``;
        ``max_abs`` is ``null`` when it is not finite (e.g. outputs of different shapes; ``note`` says why).
    """
    return shared_rows_to_json(rows)


# -- the probes: one block of the model, its legacy graph and its two twins ----------------------------------
@dataclasses.dataclass
class _Probe:
    """One block row group: the legacy ``builder`` under ``scope`` with ``config`` on ``inputs``; ``keras`` /
    ``torch``: ``(model, inputs, masks) -> {output name: array}`` on the loaded models; ``masks``: how many
    ``mask/i`` outputs of the legacy graph the twins get injected (the pre-net's always-on dropout)."""

    block: str
    label: str
    builder: str
    config: dict
    scope: str
    inputs: dict
    keras: Callable
    torch: Callable
    tol: float = FLOAT32_TOL
    relative: bool = False
    masks: int = 0


def _normal(g, shape, scale=1.0):
    return (scale * g.standard_normal(shape)).astype(np.float32)


def _keep(g, shape, rate):
    return (g.random(shape) >= rate).astype(np.float32)


def _lengths(batch, t):
    return np.array([t - (5 * i) % (t - 1) if t > 1 else 1 for i in range(batch)], np.int32)


def _ids(g, batch, lengths, n_symbols):
    lo = 2 if n_symbols > 2 else 0
    ids = g.integers(lo, n_symbols, (batch, int(max(lengths)))).astype(np.int32)
    for b, n in enumerate(lengths):
        ids[b, n:] = 0  # padding, as the feeder writes it
    return ids


def _tt(a, device=None):
    """A torch tensor of ``a`` (``None`` stays ``None``), on ``device`` (default: the CPU)."""
    if a is None:
        return None
    t = torch_tensor(np.asarray(a))
    return t if device is None else t.to(device)


def _states_k(ins, layers):
    return [(ins[f"c_{k}"], ins[f"h_{k}"]) for k in range(layers)]


def _rnn_out(out, states):
    d = {"outputs": to_numpy(out)}
    for k, (c, h) in enumerate(states):
        d[f"state/{k}/c"], d[f"state/{k}/h"] = to_numpy(c), to_numpy(h)
    return d


def _attention_keras(att, ins):
    import tensorflow as tf

    values, keys = att.process_memory(ins["memory"], ins["memory_lengths"])
    state = tf.zeros(ins["memory"].shape[:2])
    aligns, contexts, states = [], [], []
    for s in range(ins["queries"].shape[1]):
        context, a, state = att.step(tf.constant(ins["queries"][:, s]), state, values, keys, ins["memory_lengths"],
                                     for_gradient=False)
        aligns.append(np.asarray(a)), contexts.append(np.asarray(context)), states.append(np.asarray(state))
    return {"alignments": np.stack(aligns, -1), "contexts": np.stack(contexts, 1), "states": np.stack(states, 1)}


def _attention_torch(att, ins, device=None):
    import torch

    m, n = _tt(ins["memory"], device), _tt(ins["memory_lengths"].astype(np.int64), device)
    values, keys = att.process_memory(m, n)
    state = torch.zeros(ins["memory"].shape[:2], device=m.device)
    aligns, contexts, states = [], [], []
    for s in range(ins["queries"].shape[1]):
        context, a, state = att.step(_tt(ins["queries"][:, s], device), state, values, keys, n)
        aligns.append(to_numpy(a)), contexts.append(to_numpy(context)), states.append(to_numpy(state))
    return {"alignments": np.stack(aligns, -1), "contexts": np.stack(contexts, 1), "states": np.stack(states, 1)}


def _probes(hp, weights, batch, seed, device=None) -> list[_Probe]:
    """The block probes of a model with hparams ``hp`` (inputs seeded by ``seed``; the torch twin's inputs on
    ``device``, default the CPU)."""

    def tt(a):
        return _tt(a, device)

    g = np.random.default_rng(seed)
    r, m, du, mem = hp.outputs_per_step, hp.num_mels, hp.decoder_lstm_units, hp.memory_size
    lens = _lengths(batch, T_IN)
    ids = _ids(g, batch, lens, hp.n_symbols)
    dec = f"{MODEL_SCOPE}/decoder"
    conv_cfg = dict(kernel_size=hp.enc_conv_kernel_size, channels=hp.enc_conv_channels,
                    num_layers=hp.enc_conv_num_layers,
                    drop_rate=hp.tacotron_dropout_rate, activation="relu", tf1_scope="encoder_convolutions",
                    bn_position=hp.batch_norm_position)
    post_cfg = dict(kernel_size=hp.postnet_kernel_size, channels=hp.postnet_channels, num_layers=hp.postnet_num_layers,
                    drop_rate=hp.tacotron_dropout_rate, activation="tanh", tf1_scope="postnet_convolutions",
                    bn_position=hp.batch_norm_position)
    lstm_cfg = dict(layers=hp.decoder_layers, size=du, zoneout=hp.tacotron_zoneout_rate, tf1_scope="decoder_LSTM")
    step_ins = {"inputs": _normal(g, (batch, hp.prenet_layers[-1] + mem), 0.5)}
    for k in range(hp.decoder_layers):
        step_ins[f"c_{k}"] = _normal(g, (batch, du))
        step_ins[f"h_{k}"] = _normal(g, (batch, du), 0.5)
    n_layers = hp.decoder_layers
    probes = [
        _Probe("EncoderConvolutions", f"encoder_convolutions {hp.enc_conv_num_layers}x{hp.enc_conv_channels} "
               f"k{hp.enc_conv_kernel_size} on the checkpoint's embeddings", "EncoderConvolutions", conv_cfg,
               MODEL_SCOPE, {"inputs": np.asarray(weights["inputs_embedding"], np.float32)[ids]},
               lambda km, x, _: {"outputs": km.encoder_convolutions(x["inputs"], training=False)},
               lambda tm, x, _: {"outputs": tm.encoder_convolutions(tt(x["inputs"]))}, relative=True),
        _Probe("EncoderRNN", f"encoder_LSTM 2x{hp.encoder_lstm_units} lengths {lens.tolist()}", "EncoderRNN",
               dict(size=hp.encoder_lstm_units, zoneout=hp.tacotron_zoneout_rate, tf1_scope="encoder_LSTM"),
               MODEL_SCOPE, {"inputs": _normal(g, (batch, T_IN, hp.enc_conv_channels)), "input_lengths": lens},
               lambda km, x, _: {"outputs": km.encoder_lstm(x["inputs"], x["input_lengths"], training=False)},
               lambda tm, x, _: {"outputs": tm.encoder_lstm(tt(x["inputs"]),
                                                            tt(x["input_lengths"].astype(np.int64)))},
               tol=LONG_RECURRENCE_TOL),
        _Probe("Prenet", f"decoder_prenet {list(hp.prenet_layers)} {BLOCK_STEPS} frames (TF1's keep-masks injected)",
               "Prenet", dict(layers_sizes=list(hp.prenet_layers), drop_rate=hp.tacotron_dropout_rate,
                              activation="relu", tf1_scope="decoder_prenet"), dec,
               {"inputs": _normal(g, (batch, BLOCK_STEPS, m))},
               lambda km, x, masks: {"outputs": km.decoder.prenet(x["inputs"], training=False, dropout_masks=masks)},
               lambda tm, x, masks: {"outputs": tm.decoder.prenet(
                   tt(x["inputs"]), None if masks is None else [tt(k) for k in masks])},
               masks=len(hp.prenet_layers)),
        _Probe("DecoderRNN", f"decoder_LSTM {n_layers}x{du} {BLOCK_STEPS} steps from the zero state", "DecoderRNN",
               lstm_cfg, dec, {"inputs": _normal(g, (batch, BLOCK_STEPS, hp.prenet_layers[-1] + mem), 0.5)},
               lambda km, x, _: _rnn_out(*km.decoder.decoder_lstm(x["inputs"], training=False)),
               lambda tm, x, _: _rnn_out(*tm.decoder.decoder_lstm(tt(x["inputs"])))),
        _Probe("DecoderRNN", f"decoder_LSTM {n_layers}x{du} one step from random states", "DecoderRNNStep", lstm_cfg,
               dec, step_ins,
               lambda km, x, _: _rnn_out(*km.decoder.decoder_lstm(x["inputs"], _states_k(x, n_layers), training=False)),
               lambda tm, x, _: _rnn_out(*tm.decoder.decoder_lstm(
                   tt(x["inputs"]), [(tt(c), tt(h)) for c, h in _states_k(x, n_layers)]))),
        _Probe("LocationSensitiveAttention", f"attention {hp.attention_dim}-d, memory {mem}, {BLOCK_STEPS} steps",
               "LocationSensitiveAttention",
               dict(units=hp.attention_dim, filters=hp.attention_filters, kernel_size=hp.attention_kernel,
                    mask_encoder=hp.mask_encoder, smoothing=hp.smoothing, cumulate_weights=hp.cumulative_weights),
               MODEL_SCOPE, {"memory": _normal(g, (batch, T_IN, mem)), "memory_lengths": lens,
                             "queries": _normal(g, (batch, BLOCK_STEPS, du), 0.5)},
               lambda km, x, _: _attention_keras(km.decoder.attention, x),
               lambda tm, x, _: _attention_torch(tm.decoder.attention, x, device)),
        _Probe("FrameProjection", f"linear_transform_projection {du + mem}->{m * r} one step", "FrameProjection",
               dict(shape=m * r, tf1_scope="linear_transform_projection"), dec,
               {"inputs": _normal(g, (batch, du + mem))},
               lambda km, x, _: {"outputs": km.decoder.frame_projection(x["inputs"])},
               lambda tm, x, _: {"outputs": tm.decoder.frame_projection(tt(x["inputs"]))}, relative=True),
        _Probe("StopProjection", f"stop_token_projection {du + mem}->{r} one step (probabilities)", "StopProjection",
               dict(shape=r, tf1_scope="stop_token_projection"), dec, {"inputs": _normal(g, (batch, du + mem))},
               lambda km, x, _: {"outputs": km.decoder.stop_projection(x["inputs"], training=False)},
               lambda tm, x, _: {"outputs": tm.decoder.stop_projection(tt(x["inputs"]))}, relative=True),
        _Probe("Postnet",
               f"postnet_convolutions {hp.postnet_num_layers}x{hp.postnet_channels} k{hp.postnet_kernel_size}",
               "Postnet", post_cfg, MODEL_SCOPE, {"inputs": _normal(g, (batch, BLOCK_FRAMES, m))},
               lambda km, x, _: {"outputs": km.postnet(x["inputs"], training=False)},
               lambda tm, x, _: {"outputs": tm.postnet(tt(x["inputs"]))}, relative=True),
        _Probe("FrameProjection", f"postnet_projection {hp.postnet_channels}->{m}", "FrameProjection",
               dict(shape=m, tf1_scope="postnet_projection"), MODEL_SCOPE,
               {"inputs": _normal(g, (batch, BLOCK_FRAMES, hp.postnet_channels), 0.5)},
               lambda km, x, _: {"outputs": km.postnet_projection(x["inputs"])},
               lambda tm, x, _: {"outputs": tm.postnet_projection(tt(x["inputs"]))}, relative=True),
    ]
    if hp.predict_linear:
        cbhg_cfg = dict(K=hp.cbhg_kernels, conv_channels=hp.cbhg_conv_channels, pool_size=hp.cbhg_pool_size,
                        projections=[hp.cbhg_projection, m], projection_kernel_size=hp.cbhg_projection_kernel_size,
                        n_highwaynet_layers=hp.cbhg_highwaynet_layers, highway_units=hp.cbhg_highway_units,
                        rnn_units=hp.cbhg_rnn_units, tf1_scope="CBHG_postnet", bn_position=hp.batch_norm_position)
        probes += [
            _Probe("CBHG", f"CBHG_postnet K{hp.cbhg_kernels} GRU 2x{hp.cbhg_rnn_units}", "CBHG", cbhg_cfg, MODEL_SCOPE,
                   {"inputs": _normal(g, (batch, BLOCK_FRAMES, m))},
                   lambda km, x, _: {"outputs": km.post_cbhg(x["inputs"], None, training=False)},
                   lambda tm, x, _: {"outputs": tm.post_cbhg(tt(x["inputs"]), None)}, tol=LONG_RECURRENCE_TOL),
            _Probe("FrameProjection", f"cbhg_linear_specs_projection {2 * hp.cbhg_rnn_units}->{hp.num_freq}",
                   "FrameProjection", dict(shape=hp.num_freq, tf1_scope="cbhg_linear_specs_projection"), MODEL_SCOPE,
                   {"inputs": _normal(g, (batch, BLOCK_FRAMES, 2 * hp.cbhg_rnn_units), 0.5)},
                   lambda km, x, _: {"outputs": km.linear_projection(x["inputs"])},
                   lambda tm, x, _: {"outputs": tm.linear_projection(tt(x["inputs"]))}, relative=True),
        ]
    return probes


# -- the whole model -------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Run:
    """One whole-model run: ``mode`` ``"gta"`` or ``"free"``; ``inputs`` in the legacy spec's names."""

    mode: str
    label: str
    inputs: dict


def _model_runs(hp, batch, steps, seed) -> list[_Run]:
    g = np.random.default_rng(seed + 1)
    r = hp.outputs_per_step
    lens = _lengths(batch, T_IN)
    base = {"inputs": _ids(g, batch, lens, hp.n_symbols), "input_lengths": lens}
    if hp.speaker_embedding_size:
        e = np.abs(g.standard_normal((batch, hp.speaker_embedding_size)))
        base["speaker_embeddings"] = (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)
    runs = []
    for mode in ("gta", "free"):
        ins = dict(base)
        if mode == "gta":
            ins["mel_targets"] = _normal(g, (batch, steps * r, hp.num_mels), 0.8)
        for i, size in enumerate(hp.prenet_layers):
            ins[f"noise/prenet/{i}"] = _keep(g, (batch, steps, size), hp.tacotron_dropout_rate)
        label = ("GTA (teacher forced, inference), prenet masks" if mode == "gta"
                 else "free running, stop disabled, prenet masks")
        runs.append(_Run(mode, label, ins))
    return runs


def _prenet_masks(hp, ins, convert=lambda a: a):
    return {"prenet": [convert(ins[f"noise/prenet/{i}"]) for i in range(len(hp.prenet_layers))]}


def _keras_model_run(model, hp, run, steps):
    ins = run.inputs
    out = model(ins["inputs"], ins["input_lengths"], speaker_embeddings=ins.get("speaker_embeddings"),
                mel_targets=ins.get("mel_targets"), max_iters=steps, training=False, noise_masks=_prenet_masks(hp, ins))
    return {k: np.asarray(v) for k, v in out.items()}


def _torch_model_run(model, hp, run, steps, device=None):
    ins = run.inputs
    out = model(_tt(ins["inputs"].astype(np.int64), device), _tt(ins["input_lengths"].astype(np.int64), device),
                _tt(ins.get("speaker_embeddings"), device), _tt(ins.get("mel_targets"), device), steps,
                _prenet_masks(hp, ins, lambda a: _tt(a, device)))
    return {k: to_numpy(v) for k, v in out.items()}


def _with_stop_shift(model, weights, fn):
    """``fn()`` with the model's stop-projection bias lowered by :data:`STOP_BIAS_SHIFT`, restored afterwards."""
    bias = np.asarray(weights[STOP_BIAS], np.float32)
    model.load_tf1_weights({STOP_BIAS: bias + np.float32(STOP_BIAS_SHIFT)}, strict=False)
    try:
        return fn()
    finally:
        model.load_tf1_weights({STOP_BIAS: bias}, strict=False)


# -- the three implementations ---------------------------------------------------------------------------------
def _legacy_specs(hp, probes, runs, steps, weights_file, seed, stop_bias):
    from .reference import LegacySpec

    common = {"assign_file": weights_file, "assign_file_strict": True, "save_checkpoint": False}
    specs = [LegacySpec(p.builder, p.config, p.inputs, scope=p.scope, seed=seed, options=dict(common))
             for p in probes]
    for run in runs:
        options = dict(common, max_iters=steps)
        if run.mode == "free":
            options["assign"] = {STOP_BIAS: (stop_bias + np.float32(STOP_BIAS_SHIFT)).tolist()}
        specs.append(LegacySpec("Tacotron2", {"hparams": hp.to_dict(), "n_symbols": hp.n_symbols}, run.inputs,
                                seed=seed, options=options))
    return specs


def _weights_file(weights, scope: str = MODEL_SCOPE) -> str:
    """The weights (names relative to ``scope``) as ``{full TF1 name: float32 array}`` in an ``.npz`` named by its
    content (so that a rerun on the same checkpoint finds the legacy results memoised); the caller removes it after
    the subprocess ran."""
    from .reference import _workdir

    h = hashlib.sha1()
    arrays = {}
    for k in sorted(weights):
        a = np.ascontiguousarray(weights[k], dtype=np.float32)
        arrays[f"{scope}/{k}"] = a
        h.update(k.encode() + str(a.shape).encode() + a.tobytes())
    path = os.path.join(_workdir(), f"checkpoint-weights-{h.hexdigest()[:16]}.npz")
    if not os.path.exists(path):
        np.savez(path + ".tmp.npz", **arrays)
        os.replace(path + ".tmp.npz", path)
    return path


def _block_outputs(framework, model, probes, masks, masked):
    """``{probe index: outputs}`` of one framework: the probes without injected masks (``masked`` False) or those
    with them (``masked`` True; ``masks``: ``{probe index: keep-masks or None}``)."""
    import torch

    out = {}
    with torch.no_grad():
        for i, p in enumerate(probes):
            if bool(p.masks) != masked:
                continue
            fn = p.keras if framework == "Keras" else p.torch
            out[i] = {k: np.asarray(to_numpy(v)) for k, v in fn(model, p.inputs, masks.get(i)).items()}
    return out


def _whole_outputs(framework, model, hp, runs, steps, weights, progress, device=None):
    """``{run index: outputs}`` of one framework's whole model (``framework``: ``"Keras"``, else torch's, named so
    in the progress lines; its inputs on ``device``)."""
    import torch

    fn = _keras_model_run if framework == "Keras" else (
        lambda *a: _torch_model_run(*a, device=device))
    out = {}
    with torch.no_grad():
        for j, run in enumerate(runs):
            t0 = time.perf_counter()
            if run.mode == "free":
                out[j] = _with_stop_shift(model, weights, lambda run=run: fn(model, hp, run, steps))
            else:
                out[j] = fn(model, hp, run, steps)
            progress(f"{framework}: whole model, {run.label}: {steps} steps in {time.perf_counter() - t0:.1f} s")
    return out


def _pairs(outputs, legacy):
    """``[(comparison, got, ref)]``: TF1 -> Keras, TF1 -> torch (when ``legacy`` ran) and Keras <-> torch."""
    keras, torch_ = outputs
    pairs = [("TF1->Keras", keras, legacy), ("TF1->torch", torch_, legacy)] if legacy is not None else []
    return pairs + [("Keras<->torch", torch_, keras)]


def _block_rows(probes, outputs, legacy):
    """Per probe and output: its rows of the three comparisons."""
    rows = []
    for i, p in enumerate(probes):
        pairs = _pairs((outputs[0][i], outputs[1][i]), None if legacy is None else legacy[i])
        names = [n for n in pairs[0][2] if not n.startswith("mask/")]  # the reference's (TF1's drawn masks aside)
        for name in names:
            for comparison, got, ref in pairs:
                rows.append(compare(p.block, comparison, f"{p.label}: {name}", got.get(name, np.zeros(0)),
                                    ref.get(name, np.zeros(0)), p.tol, relative=p.relative))
    return rows


def _model_rows(runs, outputs, legacy, steps):
    """Per whole-model run: the steps row (free running) and its outputs' rows of the three comparisons."""
    rows = []
    for j, run in enumerate(runs):
        pairs = _pairs((outputs[0][j], outputs[1][j]), None if legacy is None else legacy[j])
        n_steps = pairs[0][2]["alignments"].shape[-1]
        if run.mode == "free":
            for comparison, got, ref in pairs:
                n_ref, n_got = ref["alignments"].shape[-1], got["alignments"].shape[-1]
                note = f"{n_got} vs {n_ref} decoder steps (max_iters={steps})"
                if n_ref < steps:
                    note += "; the stop rule fired despite the lowered stop bias"
                rows.append(Row(WHOLE_MODEL, comparison, f"{run.label}: decoder steps run", float(abs(n_got - n_ref)),
                                0.0, True, note))
        for key in ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments", "linear_outputs"):
            for comparison, got, ref in pairs:
                if key in ref:
                    rows.append(compare(WHOLE_MODEL, comparison, f"{run.label} [{n_steps} steps]: {key}",
                                        got.get(key, np.zeros(0)), ref[key], LONG_RECURRENCE_TOL))
    return rows


def _read_model(checkpoint, hparams, overrides, use_ema: bool, say) -> tuple[dict, object]:
    """``(weights, hparams)`` of the checkpoint's model, read in numpy (no TensorFlow needed)."""
    from speechblocks import checkpoint_hparams
    from speechblocks.tf1_checkpoint import read_tf1_weights

    say(f"reading {os.fspath(checkpoint)}")
    weights = read_tf1_weights(checkpoint, MODEL_SCOPE, use_ema=use_ema, require_ema=use_ema)
    if not weights:
        raise ValueError(f"TF1 checkpoint {os.fspath(checkpoint)!r} holds no variable under '{MODEL_SCOPE}/'.")
    hp = checkpoint_hparams({k: tuple(np.shape(v)) for k, v in weights.items()}, hparams, overrides,
                            source=f"TF1 checkpoint {os.fspath(checkpoint)!r}")
    n_params = sum(int(np.size(v)) for v in weights.values())
    say(f"model: {len(weights)} variables, {n_params / 1e6:.1f}M parameters; {hp.variant} (r={hp.outputs_per_step}, "
        f"speaker embedding {hp.speaker_embedding_size or 'none'}, predict_linear={hp.predict_linear})"
        + (", EMA shadows" if use_ema else ""))
    return weights, hp


# -- the torch device ---------------------------------------------------------------------------------------------
def _torch_device(device):
    import torch

    return torch.device("cpu") if device is None else torch.device(device)


def _where(device) -> str:
    """The torch side's device in the progress lines (``cpu``, ``cuda:0``)."""
    d = _torch_device(device)
    return f"{d.type}:{d.index if d.index is not None else 0}" if d.type == "cuda" else str(d)


@contextlib.contextmanager
def exact_float32(device=None):
    """On a CUDA ``device``: TF32 off for the duration (``torch.backends.cuda.matmul.allow_tf32`` and
    ``torch.backends.cudnn.allow_tf32`` False, restored afterwards), so that matrix products and convolutions run in
    float32 as on the CPU and are compared at float32's tolerances; elsewhere nothing changes."""
    if device is None or _torch_device(device).type != "cuda":
        yield
        return
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# -- the torch side alone (no TensorFlow) ------------------------------------------------------------------------
def _weights_row(model, weights) -> Row:
    """The loaded model's variables (``tf1_weights()``, TF1 layout) against the checkpoint's, all in one row."""
    got = model.tf1_weights()
    output = f"{len(weights)} variables: the loaded model's tf1_weights() vs the checkpoint's"
    if sorted(got) != sorted(weights):
        missing, extra = sorted(set(weights) - set(got)), sorted(set(got) - set(weights))
        return Row(WHOLE_MODEL, "checkpoint->torch", output, float("inf"), FLOAT32_TOL, False,
                   f"names differ: missing {missing[:3]}, unexpected {extra[:3]}")
    names = sorted(weights)
    return compare(WHOLE_MODEL, "checkpoint->torch", output,
                   np.concatenate([np.ravel(to_numpy(got[k])) for k in names]),
                   np.concatenate([np.ravel(np.asarray(weights[k], np.float32)) for k in names]), FLOAT32_TOL)


def _finite_row(output: str, value) -> Row:
    value = np.asarray(value)
    bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
    return Row(WHOLE_MODEL, "torch finite", output, float(bad), 0.0, True,
               f"{bad} non-finite of {np.size(value)} values (the max |Δ| column counts them)")


def _torch_side_rows(checkpoint, weights, hp, runs, steps, say, perturb, migrate_kwargs, device=None) -> list[Row]:
    """The rows of :data:`TORCH_SIDE_CHECKS`: what can be checked of the torch side without TensorFlow (the torch
    models on ``device``)."""
    import torch_layers
    from speechblocks.migration import migrate_checkpoint

    w = dict(weights) if perturb is None else perturb("torch", dict(weights))
    say(f"torch: building the model on {_where(device)} and loading the checkpoint's weights (no TensorFlow: no "
        f"Keras, no TF1 reference)")
    model = torch_layers.Tacotron2(hp).eval().to(_torch_device(device))
    model.load_tf1_weights(w)
    rows = [_weights_row(model, weights)]
    first = _whole_outputs("torch", model, hp, runs, steps, w, say, device)
    again = _whole_outputs("torch (rerun)", model, hp, runs, steps, w, say, device)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.pt")
        say("torch: speechblocks migrate --to torch, then Tacotron2.from_migrated")
        migrate_checkpoint(checkpoint, "torch", path, **migrate_kwargs)
        migrated = torch_layers.Tacotron2.from_migrated(path).to(_torch_device(device))
    reloaded = _whole_outputs("torch (migrated .pt)", migrated, hp, runs, steps, weights, say, device)
    for j, run in enumerate(runs):
        n_steps = first[j]["alignments"].shape[-1]
        for key in ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments", "linear_outputs"):
            if key not in first[j]:
                continue
            output = f"{run.label} [{n_steps} steps]: {key}"
            rows.append(_finite_row(output, first[j][key]))
            rows.append(compare(WHOLE_MODEL, "torch rerun", output, again[j].get(key, np.zeros(0)), first[j][key],
                                LONG_RECURRENCE_TOL))
            rows.append(compare(WHOLE_MODEL, "torch<->migrated .pt", output, reloaded[j].get(key, np.zeros(0)),
                                first[j][key], LONG_RECURRENCE_TOL))
    return rows


def run_checkpoint_parity(checkpoint, hparams=None, *, overrides: Mapping | None = None, use_ema: bool = False,
                          steps: int = 20, batch: int = 2, seed: int = 0, progress: Callable[[str], None] | None = None,
                          skip_legacy: bool = False, skip_keras: bool = False, device=None,
                          _perturb: Callable | None = None) -> list[Row]:
    """Parity of a real TF1 Tacotron-2 checkpoint: TF1 reference graph -> Keras / torch, Keras <-> torch.

    Args:
        checkpoint: TF1 checkpoint prefix (``model.ckpt-1000``) or a directory with a ``checkpoint`` file; its
            ``Tacotron_model/inference/`` variables are the model.
        hparams: ``None`` (the preset the shapes point to: RTVC with a speaker embedding, else Rayhane, every size
            read from the shapes), a preset name or a mapping of original hparams (its sizes must agree with the
            checkpoint), as ``Tacotron2.from_tf1_checkpoint``.
        overrides: hparams by original name, applied last (e.g. ``{"tacotron_dropout_rate": 0.5}``).
        use_ema: use the ``<variable>/ExponentialMovingAverage`` shadows instead of the raw weights.
        steps: decoder steps of the whole-model runs (GTA over ``steps * r`` target frames; free running exactly
            ``steps`` steps), >= 1.
        batch: rows of every random input (the rows after the first have shorter, masked text), >= 1.
        seed: seed of every random input and keep-mask.
        progress: called with one line per stage (the CLI prints them to stderr); ``None`` is silent.
        skip_legacy: compare Keras and torch only (no TF1 reference, no ``tf_keras`` needed).
        skip_keras: with ``skip_legacy``: no TensorFlow at all; only the torch side's own checks run
            (:data:`TORCH_SIDE_CHECKS`; no comparison with another framework is made).
        device: where the torch side runs (a ``torch.device`` or its name, ``"cuda:0"``; default ``None``, the
            CPU), in float32; on CUDA with TF32 off for the whole run (:func:`exact_float32`). Keras and the TF1
            reference keep TensorFlow's own placement.
        _perturb: test hook ``(framework, weights) -> weights`` ("Keras" / "torch") applied before that
            framework's model loads them (a sabotaged twin must fail its rows).

    Returns:
        the rows (:class:`parity_tests.report.Row`): per block of the model and for the whole model (GTA and free
        running), ``TF1->Keras``, ``TF1->torch`` and ``Keras<->torch`` (only the last with ``skip_legacy``; with
        ``skip_keras`` the whole model's :data:`TORCH_SIDE_CHECKS` instead); ``parity_tests.report.format_table``
        prints them, :func:`rows_to_json` serialises them.

    Raises:
        LegacyReferenceUnavailable: ``tf_keras`` is not installed and ``skip_legacy`` is False (checked first).
        ValueError: bad ``steps``/``batch``, ``skip_keras`` without ``skip_legacy``; an unreadable checkpoint, one
            without ``Tacotron_model/inference/`` variables, ``use_ema`` without shadows, or hparams contradicting the
            shapes.
        FileNotFoundError: the checkpoint does not exist.
        parity_tests.reference.LegacyReferenceError: the TF1 reference subprocess failed (its stderr tail).
    """
    if not skip_legacy and not legacy_reference_available():
        raise LegacyReferenceUnavailable(
            "the TF1 legacy reference needs tf_keras: pip install 'speechblocks[legacy]' (or pass skip_legacy / "
            "--skip-legacy to compare Keras and torch only)")
    for name, value in (("steps", steps), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"run_checkpoint_parity: `{name}` must be an integer >= 1; got {value!r}.")
    if skip_keras and not skip_legacy:
        raise ValueError("run_checkpoint_parity: `skip_keras` needs `skip_legacy` (the TF1 reference needs "
                         "TensorFlow too).")
    steps, batch = int(steps), int(batch)
    say = progress or (lambda line: None)
    with exact_float32(device):
        return _run(checkpoint, hparams, overrides, use_ema, steps, batch, seed, say, skip_legacy, skip_keras, device,
                    _perturb)


def _run(checkpoint, hparams, overrides, use_ema, steps, batch, seed, say, skip_legacy, skip_keras, device,
         _perturb) -> list[Row]:
    """The body of :func:`run_checkpoint_parity`, its arguments checked."""
    t_start = time.perf_counter()

    weights, hp = _read_model(checkpoint, hparams, overrides, use_ema, say)
    runs = _model_runs(hp, batch, steps, seed)
    if skip_keras:
        rows = _torch_side_rows(checkpoint, weights, hp, runs, steps, say, _perturb,
                                dict(use_ema=use_ema, hparams=hparams, overrides=overrides), device)
        say(f"{len(rows)} rows of the torch side alone, {sum(not r.passed for r in rows)} failed "
            f"({time.perf_counter() - t_start:.1f} s)")
        return rows
    probes = _probes(hp, weights, batch, seed, device)

    legacy_future, executor, weights_file = None, None, None
    if not skip_legacy:
        from .reference import run_legacy

        weights_file = _weights_file(weights)
        specs = _legacy_specs(hp, probes, runs, steps, weights_file, seed, np.asarray(weights[STOP_BIAS], np.float32))
        say(f"TF1 legacy reference: {len(specs)} graphs in one subprocess (in the background)")
        executor = concurrent.futures.ThreadPoolExecutor(1)
        legacy_future = executor.submit(run_legacy, specs)
    try:
        import tf_layers
        import torch_layers

        models, blocks, whole = {}, {}, {}
        for framework in ("Keras", "torch"):
            w = dict(weights) if _perturb is None else _perturb(framework, dict(weights))
            where = "" if framework == "Keras" else f" on {_where(device)}"
            say(f"{framework}: building the model{where} and loading the checkpoint's weights")
            model = (tf_layers.Tacotron2(hp) if framework == "Keras"
                     else torch_layers.Tacotron2(hp).eval().to(_torch_device(device)))
            model.load_tf1_weights(w)
            models[framework] = (model, w)
            say(f"{framework}: blocks")
            blocks[framework] = _block_outputs(framework, model, probes, {}, masked=False)
            whole[framework] = _whole_outputs(framework, model, hp, runs, steps, w, say, device)

        legacy_blocks, legacy_whole, masks = {}, {}, {}
        if legacy_future is not None:
            say("TF1 legacy reference: waiting for the subprocess")
            legacy = legacy_future.result()
            say(f"TF1 legacy reference: done ({time.perf_counter() - t_start:.1f} s since the start)")
            legacy_blocks = {i: res.outputs for i, res in enumerate(legacy[:len(probes)])}
            legacy_whole = {j: res.outputs for j, res in enumerate(legacy[len(probes):])}
            for i, p in enumerate(probes):  # the keep-masks the TF1 graph drew (always-on pre-net dropout)
                if p.masks:
                    drawn = [legacy_blocks[i].get(f"mask/{k}") for k in range(p.masks)]
                    masks[i] = None if all(m is None for m in drawn) else drawn
        else:  # no TF1 draw to reuse: the twins share seeded keep-masks
            g = np.random.default_rng(seed + 2)
            for i, p in enumerate(probes):
                if p.masks:
                    shape = p.inputs["inputs"].shape[:-1]
                    masks[i] = [_keep(g, shape + (size,), hp.tacotron_dropout_rate)
                                for size in p.config["layers_sizes"]]
        for framework, (model, _) in models.items():
            blocks[framework].update(_block_outputs(framework, model, probes, masks, masked=True))
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
        if weights_file is not None and os.path.exists(weights_file):
            os.remove(weights_file)

    ran = legacy_future is not None
    rows = _block_rows(probes, (blocks["Keras"], blocks["torch"]), legacy_blocks if ran else None)
    rows += _model_rows(runs, (whole["Keras"], whole["torch"]), legacy_whole if ran else None, steps)
    n_fail = sum(not r.passed for r in rows)
    say(f"{len(rows)} rows, {n_fail} failed ({time.perf_counter() - t_start:.1f} s)")
    return rows
