"""Parity of the whole ``Tacotron2``: the TF1 graph (embedding, encoder, attention decoder in a ``while_loop``,
postnet, post-CBHG, ``add_loss``, ``tf.gradients``) -> Keras / torch, Keras <-> torch, at real sizes.

Both twins are built with ``Tacotron2.from_tf1_checkpoint`` from the real TF1 checkpoint the reference wrote
(every variable, names as the original graph). RTVC (r = 2, 256-d speaker embedding, 768-d memory) and Rayhane
(r = 1, BN after the activation, clipped outputs, post-CBHG to 1025 linear bins) at their full sizes:

* teacher forced, not training (the original's GTA synthesis), prenet dropout on with injected keep-masks;
* free running: RTVC with dropout 0 until the original stop rule fires (decisive stop weights; with random prenet
  masks these stop at step 1 or never), Rayhane with injected prenet masks for a fixed number of steps (the
  stop-token bias set so that it never fires);
* training: every loss term and the gradient of every variable -- RTVC with the default loss (``mask_decoder``
  off: plain means, RTVC's L1 term on the decoder outputs) and rates on, every dropout/zoneout keep-mask
  injected; Rayhane with ``mask_decoder`` (masked terms, the masked linear loss) and rates 0. Gradient rows compare
  ``max |Δ| / max |g_TF1|`` per variable (docs/ARCHITECTURE.md, tolerances: within 1e-3 of the largest gradient of each
  variable; the scale is floored at 1e-3 of the model's largest gradient, see :func:`_grad_rows`) and report the worst
  variable of each part of the model.
"""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import Row, compare
from ._common import LONG_RECURRENCE_TOL, rng, to_numpy, torch_tensor

BLOCK = "Tacotron2"
GRAD_TOL = 1e-3
STOP_BIAS = "decoder/stop_token_projection/projection_stop_token_projection/bias"
STOP_KERNEL = "decoder/stop_token_projection/projection_stop_token_projection/kernel"


def _decisive_stop(memory_size=768, decoder_units=1024, r=2):
    """Stop-projection weights whose probabilities are far from 0.5 (random weights give logits ~ 0: the stop rule's
    rounding would hinge on float noise); with these the RTVC case below stops at step 15 of 60."""
    kernel = 0.1 * np.random.default_rng(1).standard_normal((decoder_units + memory_size, r))
    return {STOP_KERNEL: kernel.astype(np.float32).tolist(), STOP_BIAS: 0.0}
OUTPUTS = ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments", "linear_outputs")
LOSSES = ("before_loss", "after_loss", "stop_token_loss", "linear_loss", "regularization_loss", "loss")
BATCH, T_IN, IN_LENGTHS = 2, 12, [12, 7]

# (label, preset, hparam overrides, mode, runner options, noise groups to inject)
CASES = [  # every mode once per preset; each case covers what a second case of the same mode would add
    ("RTVC GTA (teacher forced, inference), prenet masks", "rtvc", {}, "teacher_forced", {}, ("prenet",)),
    ("RTVC free running to the stop rule, dropout 0", "rtvc", {"tacotron_dropout_rate": 0.0, "max_iters": 60},
     "free_running", {"assign": _decisive_stop()}, ()),
    ("RTVC training, every keep-mask injected: losses + gradients", "rtvc", {}, "train", {"loss": True},
     ("prenet", "encoder_convolutions", "encoder_LSTM", "decoder_LSTM", "postnet_convolutions")),
    ("Rayhane GTA + linear, prenet masks", "rayhane", {}, "teacher_forced", {}, ("prenet",)),
    ("Rayhane free running 15 steps, prenet masks", "rayhane", {"max_iters": 15}, "free_running",
     {"assign": {STOP_BIAS: -30.0}}, ("prenet",)),
    ("Rayhane training, mask_decoder, rates 0: losses + gradients", "rayhane",
     {"mask_decoder": True, "tacotron_dropout_rate": 0.0, "tacotron_zoneout_rate": 0.0}, "train", {"loss": True}, ()),
]


#: the cases ``make test`` runs (parity_tests/test_tacotron2_parity.py): RTVC in every mode, Rayhane's training case
#: (its masked losses, linear output, clipping and BN-after-activation, gradients of every variable). Rayhane's GTA
#: and free-running cases (~25 s of CPU each at full size) run in ``make parity``, like every case.
TEST_CASES = [i for i, c in enumerate(CASES) if c[1] == "rtvc" or c[3] == "train"]


def _hparams(preset, overrides):
    from speechblocks import tacotron2_hparams

    hp = tacotron2_hparams(preset)
    hp.update(overrides)
    return hp


def _noise(hp, groups, steps, seed):
    """Keep-masks ``{legacy input name: array}`` of the given groups (Bernoulli(1 - rate))."""
    g = rng(seed)
    p_drop, z = hp.tacotron_dropout_rate, hp.tacotron_zoneout_rate
    r = hp.outputs_per_step

    def keep(shape, rate):
        return (g.random(shape) >= rate).astype(np.float32)

    out = {}
    if "prenet" in groups:
        for i, size in enumerate(hp.prenet_layers):
            out[f"noise/prenet/{i}"] = keep((BATCH, steps, size), p_drop)
    if "encoder_convolutions" in groups:
        for i in range(hp.enc_conv_num_layers):
            out[f"noise/encoder_convolutions/{i}"] = keep((BATCH, T_IN, hp.enc_conv_channels), p_drop)
    if "encoder_LSTM" in groups:
        for k in ("fw_c", "fw_h", "bw_c", "bw_h"):
            out[f"noise/encoder_LSTM/{k}"] = keep((BATCH, T_IN, hp.encoder_lstm_units), z)
    if "decoder_LSTM" in groups:
        for k in range(hp.decoder_layers):
            for s in ("c", "h"):
                out[f"noise/decoder_LSTM/{k}/{s}"] = keep((BATCH, steps, hp.decoder_lstm_units), z)
    if "postnet_convolutions" in groups:
        for i in range(hp.postnet_num_layers):
            out[f"noise/postnet_convolutions/{i}"] = keep((BATCH, steps * r, hp.postnet_channels), p_drop)
    return out


def noise_masks(hp, legacy_inputs, convert=lambda a: a):
    """The ``noise_masks`` dict of the twins from the legacy ``noise/...`` inputs."""
    def get(name):
        return convert(legacy_inputs[name])

    out = {}
    if "noise/prenet/0" in legacy_inputs:
        out["prenet"] = [get(f"noise/prenet/{i}") for i in range(len(hp.prenet_layers))]
    if "noise/encoder_convolutions/0" in legacy_inputs:
        out["encoder_convolutions"] = [get(f"noise/encoder_convolutions/{i}") for i in range(hp.enc_conv_num_layers)]
    if "noise/encoder_LSTM/fw_c" in legacy_inputs:
        out["encoder_LSTM"] = ((get("noise/encoder_LSTM/fw_c"), get("noise/encoder_LSTM/fw_h")),
                               (get("noise/encoder_LSTM/bw_c"), get("noise/encoder_LSTM/bw_h")))
    if "noise/decoder_LSTM/0/c" in legacy_inputs:
        out["decoder_LSTM"] = [(get(f"noise/decoder_LSTM/{k}/c"), get(f"noise/decoder_LSTM/{k}/h"))
                               for k in range(hp.decoder_layers)]
    if "noise/postnet_convolutions/0" in legacy_inputs:
        out["postnet_convolutions"] = [get(f"noise/postnet_convolutions/{i}") for i in range(hp.postnet_num_layers)]
    return out or None


def _inputs(hp, mode, groups, seed):
    g = rng(seed)
    r = hp.outputs_per_step
    t_out = 16 if r == 2 else 12
    lengths = np.array(IN_LENGTHS, np.int32)
    ids = g.integers(2, hp.n_symbols, (BATCH, T_IN)).astype(np.int32)
    ids[1, lengths[1]:] = 0  # padding, as the feeder writes it
    ins = {"inputs": ids, "input_lengths": lengths}
    if hp.speaker_embedding_size:
        e = np.abs(g.standard_normal((BATCH, hp.speaker_embedding_size)))
        ins["speaker_embeddings"] = (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)
    steps = hp.max_iters
    if mode != "free_running":
        t_lens = np.array([t_out, t_out - 5], np.int32)
        mel = 0.8 * g.standard_normal((BATCH, t_out, hp.num_mels))
        stop = np.ones((BATCH, t_out), np.float32)
        for b in range(BATCH):
            mel[b, t_lens[b]:] = -hp.max_abs_value
            stop[b, :t_lens[b] - 1] = 0.0
        ins.update(mel_targets=mel.astype(np.float32), stop_token_targets=stop, targets_lengths=t_lens)
        if hp.predict_linear:
            ins["linear_targets"] = (0.8 * g.standard_normal((BATCH, t_out, hp.num_freq))).astype(np.float32)
        steps = t_out // r
    ins.update(_noise(hp, groups, steps, seed + 1))
    return ins


def legacy_specs():
    from speechblocks import resolve_hparams

    specs = []
    for i, (_, preset, over, mode, options, groups) in enumerate(CASES):
        hp_dict = _hparams(preset, over)
        hp = resolve_hparams(hp_dict)
        ins = _inputs(hp, mode, groups, 300 + 10 * i)
        if mode == "teacher_forced":  # GTA synthesis needs no loss inputs
            ins = {k: v for k, v in ins.items() if k not in ("stop_token_targets", "targets_lengths", "linear_targets")}
        specs.append(LegacySpec("Tacotron2", {"hparams": hp_dict, "n_symbols": 66}, ins, training=mode == "train",
                                seed=40 + i, options=dict(options)))
    return specs


def _grad_rows(comparison, label, got, ref):
    """One row per model part: the worst ``max |Δ| / max |g_ref|`` over that part's variables.

    The scale of a variable is its largest reference gradient, floored at 1e-3 of the largest gradient of the model:
    conv biases right before training-mode batch norm have an exact gradient of zero, which each framework computes
    as float noise (~1e-7 against a largest gradient ~0.3) that cannot be compared relative to itself.
    """
    floor = 1e-3 * max(float(np.max(np.abs(r))) for r in ref.values())
    parts: dict[str, tuple[float, str]] = {}
    for name, r in ref.items():
        g = got.get(name)
        part = "/".join(name.split("/")[:2]) if name.startswith("decoder/") else name.split("/")[0]
        if g is None or np.shape(g) != np.shape(r):
            parts[part] = (float("inf"), name)
            continue
        scale = max(float(np.max(np.abs(r))), floor)
        err = float(np.max(np.abs(np.asarray(g, np.float64) - r))) / (scale if scale > 0 else 1.0)
        if part not in parts or err > parts[part][0]:
            parts[part] = (err, name)
    rows = []
    for part, (err, name) in sorted(parts.items()):
        n = sum(1 for k in ref if k == part or k.startswith(part + "/"))
        rows.append(Row(BLOCK, comparison, f"{label}: grad {part} ({n} vars; worst {name.split('/')[-1]}, "
                                           f"rel. to max |g|)", err, GRAD_TOL))
    return rows


def _keras_model(res, hp_dict):
    from tf_layers import Tacotron2

    return Tacotron2.from_tf1_checkpoint(res.checkpoint, hparams=hp_dict)


def _torch_model(res, hp_dict):
    from torch_layers import Tacotron2

    return Tacotron2.from_tf1_checkpoint(res.checkpoint, hparams=hp_dict).eval()


def _keras_run(model, ins, mode, hp):
    noise = noise_masks(hp, ins)
    args = (ins["inputs"], ins["input_lengths"])
    spk = ins.get("speaker_embeddings")
    if mode == "train":
        losses, grads = model.tf1_loss_and_gradients(*args, ins["mel_targets"], ins["stop_token_targets"],
                                                     ins["targets_lengths"], speaker_embeddings=spk,
                                                     linear_targets=ins.get("linear_targets"), noise_masks=noise)
        return None, losses, grads
    out = model(*args, speaker_embeddings=spk, mel_targets=ins.get("mel_targets"), noise_masks=noise)
    return {k: np.asarray(v) for k, v in out.items()}, None, None


def _torch_run(model, ins, mode, hp):
    import torch

    def t(a):
        return None if a is None else torch_tensor(a)

    noise = noise_masks(hp, ins, torch_tensor)
    ids, lens = torch_tensor(ins["inputs"].astype(np.int64)), torch_tensor(ins["input_lengths"].astype(np.int64))
    spk = t(ins.get("speaker_embeddings"))
    if mode == "train":
        losses, grads = model.tf1_loss_and_gradients(
            ids, lens, t(ins["mel_targets"]), t(ins["stop_token_targets"]),
            torch_tensor(ins["targets_lengths"].astype(np.int64)), speaker_embeddings=spk,
            linear_targets=t(ins.get("linear_targets")), noise_masks=noise)
        return None, losses, grads
    with torch.no_grad():
        out = model(ids, lens, speaker_embeddings=spk, mel_targets=t(ins.get("mel_targets")), noise_masks=noise)
    return {k: to_numpy(v) for k, v in out.items()}, None, None


def rows(legacy, cases=None):
    """The rows of ``cases`` (default: all of :data:`CASES`), ``legacy`` their results in the same order."""
    from speechblocks import resolve_hparams

    out = []
    for (label, _, _, mode, _, _), res in zip(CASES if cases is None else cases, legacy, strict=True):
        hp_dict = res.spec.config["hparams"]
        hp = resolve_hparams(hp_dict)
        ins = res.spec.inputs
        runs = {"Keras": _keras_run(_keras_model(res, hp_dict), ins, mode, hp),
                "torch": _torch_run(_torch_model(res, hp_dict), ins, mode, hp)}
        if mode == "train":
            ref_losses = {k: float(res.outputs[f"loss/{k}"]) for k in LOSSES}
            ref_grads = {k[len("grad/"):]: v for k, v in res.outputs.items() if k.startswith("grad/")}
            for fw, (_, losses, grads) in runs.items():
                for k in LOSSES:
                    out.append(compare(BLOCK, f"TF1->{fw} train", f"{label}: {k}", losses[k], ref_losses[k],
                                       LONG_RECURRENCE_TOL, relative=True))
                out += _grad_rows(f"TF1->{fw} train", label, grads, ref_grads)
            out += [compare(BLOCK, "Keras<->torch train", f"{label}: {k}", runs["torch"][1][k], runs["Keras"][1][k],
                            LONG_RECURRENCE_TOL, relative=True) for k in LOSSES]
            out += _grad_rows("Keras<->torch train", label, runs["torch"][2], runs["Keras"][2])
            continue
        steps = res.outputs["alignments"].shape[-1]
        tag = f"{label} [{steps} steps]"
        for key in OUTPUTS:
            if key not in res.outputs:
                continue
            ref = res.outputs[key]
            for fw, (outputs, _, _) in runs.items():
                out.append(compare(BLOCK, f"TF1->{fw}", f"{tag}: {key}", outputs.get(key, np.zeros(0)), ref,
                                   LONG_RECURRENCE_TOL))
            out.append(compare(BLOCK, "Keras<->torch", f"{tag}: {key}", runs["torch"][0].get(key, np.zeros(0)),
                               runs["Keras"][0][key], LONG_RECURRENCE_TOL))
    return out
