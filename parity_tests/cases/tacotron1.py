"""Parity of the whole ``Tacotron1`` (keithito/tacotron, both layouts, and mimic2): the TF1 graph (embedding,
encoder pre-net, CBHG, the attention decoder in a ``while_loop``, post CBHG, ``add_loss``, ``tf.gradients``) ->
Keras / torch, Keras <-> torch.

Both twins are built with ``Tacotron1.from_tf1_checkpoint(checkpoint, hparams)`` from the real TF1 checkpoint the
reference wrote (every variable under ``model/inference``, the originals' names). Small sizes (a small legacy graph
still costs ~8 s of CPU, ~16 s with its gradients: the CBHG banks keep the originals' K = 16 / 8 and 128
channels), :data:`CASES` has each of the three layouts in every mode (``make parity``); ``make test`` runs
:data:`TEST_CASES`, each layout once and each mode once:

* teacher forced inference (no dropout, moving statistics);
* free running with random weights (no frame is ever exactly zero: the loop runs to the ``max_iters`` cap);
  ``keithito-20170720``'s with ``mask_memory`` (the twins' opt-in, not the originals');
* training, teacher forced: the training-mode outputs with injected keep-masks for both pre-nets (encoder and
  decoder), the three loss terms and the gradient of every trainable variable (the graph's ``tf.gradients``).

Gradient rows give, per part of the model, the worst variable's ``max |Δ| / max(max |g_ref|, 1e-3)``: within
1e-3 of each variable's largest |gradient|, with an absolute floor of 1e-6 (the row note says so). The floor is for
the conv biases right before a training-mode batch norm (the CBHGs' ``proj_2``, linear; and any bank or ``proj_1``
channel whose ReLU is active at every position): the batch mean removes them, so their gradient is exactly zero
in exact maths and ~1e-9 of float32 noise in every framework, which cannot be compared relative to itself.
"""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import Row, compare
from ._common import LONG_RECURRENCE_TOL, rng, to_numpy, torch_tensor

BLOCK = "Tacotron1"
SCOPE = "model/inference"
GRAD_TOL = 1e-3
GRAD_SCALE_FLOOR = 1e-3  # x GRAD_TOL: an absolute floor of 1e-6 on the allowed gradient difference
OUTPUTS = ("mel_outputs", "linear_outputs", "alignments")
LOSSES = ("mel_loss", "linear_loss", "loss")
SMALL = dict(num_mels=6, num_freq=9, outputs_per_step=2, prenet_depths=[6, 4], encoder_depth=6, attention_depth=5,
             decoder_depth=7, postnet_depth=6, n_symbols=10, max_iters=6)
BATCH, T_IN, IN_LENGTHS, T_OUT = 2, 7, [7, 4], 8
LAYOUTS = {"keithito-20180906": "keithito", "keithito-20170720": "keithito", "mimic2": "mimic2"}

MODES = {"teacher_forced": "teacher forced inference",
         "free_running": f"free running to max_iters={SMALL['max_iters']}",
         "train": "training, pre-net keep-masks: losses + gradients"}
MASK_MEMORY = ("keithito-20170720", "free_running")  # the twins' opt-in (not the originals'), once

# (label, layout, mode, mask_memory): every layout in every mode (``make parity``)
CASES = [(f"{layout} {label}" + (", mask_memory" if (layout, mode) == MASK_MEMORY else ""), layout, mode,
          (layout, mode) == MASK_MEMORY) for layout in LAYOUTS for mode, label in MODES.items()]
#: the cases ``make test`` runs (parity_tests/test_tacotron1_parity.py): each layout once, each mode once -- a
#: small legacy graph still costs ~8 s of CPU (~16 s with its gradients), the three CBHG banks' K = 16 / 8 convs
TEST_CASES = [CASES.index(c) for c in CASES if (c[1], c[2]) in
              {("keithito-20180906", "teacher_forced"), MASK_MEMORY, ("mimic2", "train")}]


def _hparams(layout):
    """The small model's original names (mimic2 calls the embedding width ``embedding_dim``)."""
    from speechblocks import tacotron1_hparams

    preset = LAYOUTS[layout]
    return dict(tacotron1_hparams(preset), **SMALL, **({"embedding_dim": 5} if preset == "mimic2" else
                                                       {"embed_depth": 5}))


def _inputs(mode, seed):
    g = rng(seed)
    ids = g.integers(1, SMALL["n_symbols"], (BATCH, T_IN)).astype(np.int32)
    ids[1, IN_LENGTHS[1]:] = 0  # padding, as the feeder writes it
    ins = {"inputs": ids, "input_lengths": np.array(IN_LENGTHS, np.int32)}
    if mode == "free_running":
        return ins
    ins["mel_targets"] = g.standard_normal((BATCH, T_OUT, SMALL["num_mels"])).astype(np.float32)
    if mode == "train":
        ins["linear_targets"] = g.standard_normal((BATCH, T_OUT, SMALL["num_freq"])).astype(np.float32)
        steps = T_OUT // SMALL["outputs_per_step"]
        for i, d in enumerate(SMALL["prenet_depths"]):
            ins[f"noise/encoder_prenet/{i}"] = (g.random((BATCH, T_IN, d)) >= 0.5).astype(np.float32)
            ins[f"noise/decoder_prenet/{i}"] = (g.random((BATCH, steps, d)) >= 0.5).astype(np.float32)
    return ins


def legacy_specs():
    specs = []
    for i, (_, layout, mode, mask) in enumerate(CASES):
        config = {"hparams": _hparams(layout), "layout": layout, "mask_memory": mask}
        train = mode == "train"
        specs.append(LegacySpec(BLOCK, config, _inputs(mode, 500 + 10 * i), scope=SCOPE, training=train,
                                seed=60 + i, options={"loss": True} if train else {}))
    return specs


def _noise(ins, convert=lambda a: a):
    n = len(SMALL["prenet_depths"])
    if "noise/encoder_prenet/0" not in ins:
        return None
    return {g: [convert(ins[f"noise/{g}/{i}"]) for i in range(n)] for g in ("encoder_prenet", "decoder_prenet")}


def _keras_run(res, mode):
    """Outputs (and in training the losses and gradients) of the Keras model loaded from the result's checkpoint.

    Training: ``Tacotron1.tf1_loss_and_gradients``'s computation (one training-mode teacher-forced pass under a
    ``GradientTape``, ``tacotron1_loss``, the gradient of every ``tf1_trainable_variables()``), run eagerly: its
    ``tf.function`` trace costs ~13 s of CPU per model, the eager pass ~2 s; the forward pass under the tape gives
    the training outputs too.
    """
    import tensorflow as tf

    from tf_layers import Tacotron1

    cfg, ins = res.spec.config, res.spec.inputs
    model = Tacotron1.from_tf1_checkpoint(res.checkpoint, cfg["hparams"], mask_memory=cfg["mask_memory"])
    args, noise = (ins["inputs"], ins["input_lengths"]), _noise(ins)
    if mode != "train":
        out = model(*args, mel_targets=ins.get("mel_targets"), noise_masks=noise)
        return {k: np.asarray(out[k]) for k in OUTPUTS}, None, None
    variables = model.tf1_trainable_variables()
    with tf.GradientTape() as tape:
        out = model(*args, mel_targets=ins["mel_targets"], training=True, noise_masks=noise)
        losses = model.tacotron1_loss(out, ins["mel_targets"], ins["linear_targets"])
    grads = tape.gradient(losses["loss"], list(variables.values()))
    grads = {name: np.zeros(v.shape, np.float32) if g is None else np.asarray(tf.convert_to_tensor(g))
             for (name, v), g in zip(variables.items(), grads)}
    return {k: np.asarray(out[k]) for k in OUTPUTS}, {k: float(v) for k, v in losses.items()}, grads


def _torch_run(res, mode):
    import torch

    from torch_layers import Tacotron1

    cfg, ins = res.spec.config, res.spec.inputs
    model = Tacotron1.from_tf1_checkpoint(res.checkpoint, cfg["hparams"], mask_memory=cfg["mask_memory"])
    ids, lens = torch_tensor(ins["inputs"].astype(np.int64)), torch_tensor(ins["input_lengths"].astype(np.int64))
    mel = None if "mel_targets" not in ins else torch_tensor(ins["mel_targets"])
    noise = _noise(ins, torch_tensor)
    model.train(mode == "train")
    with torch.no_grad():
        out = {k: to_numpy(v) for k, v in model(ids, lens, mel, None, noise).items() if k in OUTPUTS}
    if mode != "train":
        return out, None, None
    losses, grads = model.tf1_loss_and_gradients(ids, lens, mel, torch_tensor(ins["linear_targets"]), noise)
    return out, losses, grads


def _part(name):
    """The part of the model a TF1 variable name belongs to (the decoder split into its pieces)."""
    if not name.startswith("decoder/"):
        return name.split("/")[0]
    if "_attention/" in name:
        return "decoder attention"
    if "decoder_prenet/" in name:
        return "decoder pre-net"
    if "gru_cell/" in name:
        return "decoder GRUs"
    return "decoder projections"


def _grad_rows(comparison, label, got, ref):
    """One row per model part: the worst ``max |Δ| / max(max |g_ref|, 1e-3)`` over that part's variables (every
    variable within 1e-3 of its largest |gradient|, the allowed difference floored at 1e-6: the biases before a
    training-mode batch norm have a zero gradient in exact maths, float noise here)."""
    parts: dict[str, tuple[float, str, int]] = {}
    for name in sorted(set(ref) | set(got)):
        r, g = ref.get(name), got.get(name)
        part = _part(name)
        if r is None or g is None or np.shape(g) != np.shape(r):
            err = float("inf")
        else:
            scale = max(float(np.max(np.abs(r))), GRAD_SCALE_FLOOR)
            err = float(np.max(np.abs(np.asarray(g, np.float64) - r))) / scale
        worst, worst_name, n = parts.get(part, (-1.0, "", 0))
        parts[part] = (err, name, n + 1) if err > worst else (worst, worst_name, n + 1)
    return [Row(BLOCK, comparison, f"{label}: grad {part} ({n} vars; worst {name.split('/')[-1]}, "
                                   f"rel. to max(max |g|, 1e-3))", err, GRAD_TOL,
                note="the allowed difference is floored at 1e-6: conv biases before a training-mode batch norm "
                     "have a zero gradient in exact maths, ~1e-9 of float32 noise")
            for part, (err, name, n) in sorted(parts.items())]


def rows(legacy, cases=None):
    """The rows of ``cases`` (default: all of :data:`CASES`), ``legacy`` their results in the same order."""
    out = []
    for (label, _, mode, _), res in zip(CASES if cases is None else cases, legacy, strict=True):
        runs = {"Keras": _keras_run(res, mode), "torch": _torch_run(res, mode)}
        steps = res.outputs["alignments"].shape[-1]
        comparisons = [(f"TF1->{fw}", runs[fw], (res.outputs, None, None)) for fw in runs]
        comparisons.append(("Keras<->torch", runs["torch"], runs["Keras"]))
        suffix = " train" if mode == "train" else ""
        for comparison, got, ref in comparisons:
            for key in OUTPUTS:
                out.append(compare(BLOCK, comparison + suffix, f"{label} [{steps} steps]: {key}", got[0][key],
                                   ref[0][key], LONG_RECURRENCE_TOL))
        if mode != "train":
            continue
        ref_losses = {k: float(res.outputs[f"loss/{k}"]) for k in LOSSES}
        ref_grads = {k[len("grad/"):]: v for k, v in res.outputs.items() if k.startswith("grad/")}
        for comparison, got, ref in ((f"TF1->{fw}", runs[fw], (None, ref_losses, ref_grads)) for fw in runs):
            out += [compare(BLOCK, comparison + suffix, f"{label}: {k}", got[1][k], ref[1][k], LONG_RECURRENCE_TOL,
                            relative=True) for k in LOSSES]
            out += _grad_rows(comparison + suffix, label, got[2], ref[2])
        out += [compare(BLOCK, "Keras<->torch train", f"{label}: {k}", runs["torch"][1][k], runs["Keras"][1][k],
                        LONG_RECURRENCE_TOL, relative=True) for k in LOSSES]
        out += _grad_rows("Keras<->torch train", label, runs["torch"][2], runs["Keras"][2])
    return out
