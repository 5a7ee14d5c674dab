"""Legacy builders of the Tacotron-1 family (keithito/tacotron, mimic2) and of its two attention mechanisms.

A build function takes ``(config, inputs, training, options)`` and returns ``(block_scope, outputs)``; the runner
opens the spec's scope around it (give ``scope="model/inference"`` for the originals' checkpoint names). The graph
code is :mod:`.tf1_tacotron1`, imported when a builder runs (this module imports no TensorFlow at import time, so
the main process can use :func:`default_checkpoint_spec` and :func:`write_default_checkpoint`).

``"Tacotron1"``: ``config = {"hparams": <anything speechblocks.resolve_tacotron1_hparams takes: a preset name or a
mapping of original names>, "layout": "keithito-20170720" | "keithito-20180906" | "mimic2" | None (the variant's
default), "mask_memory": bool (default False, not the original)}``. Inputs: ``inputs`` int32 ``[B, T_in]``,
``input_lengths`` int32 ``[B]``, optional ``mel_targets`` ``[B, T_out, M]`` (teacher forcing, in any mode; free
running without), ``linear_targets`` ``[B, T_out, num_freq]`` (for the loss), keep-masks
``noise/encoder_prenet/{i}`` ``[B, T_in, prenet_depths[i]]`` and ``noise/decoder_prenet/{i}``
``[B, steps, prenet_depths[i]]`` (a given mask replaces that layer's dropout in any mode; absent: random dropout
in training only). Outputs ``mel_outputs`` ``[B, steps*r, M]``, ``linear_outputs`` ``[B, steps*r, num_freq]``,
``alignments`` ``[B, T_in, steps]``, ``decoder_outputs`` ``[B, steps, M*r]``; with ``options["loss"]`` also
``loss/mel_loss``, ``loss/linear_loss``, ``loss/loss`` and ``grad/<variable name relative to the builder's scope>``
for every trainable variable (zeros where the loss does not depend on it; ``options["gradients"] = False`` leaves
them out). ``options["max_iters"]`` overrides ``hparams.max_iters`` (the loop's cap in every mode, as the
originals' ``dynamic_decode(maximum_iterations=hp.max_iters)``). The encoder (K = 16) and post (K = 8) CBHG banks
are the originals' constants and cannot be overridden. Variable names: exactly
``speechblocks.tacotron1_schema.tf1_variable_shapes(hp, layout)`` relative to the spec's scope.

``"BahdanauAttention"`` / ``"Mimic2LocationAttention"``: ``config = {"units": int, "filters": int (20),
"kernel_size": int (7), "mask_memory": bool (False)}`` (``filters``/``kernel_size``: location attention only).
Inputs ``memory`` ``[B, T, E]``, ``memory_lengths`` int32 ``[B]`` (used only with ``mask_memory``: memory zeroed
past the length, scores there ``-inf`` before the softmax), ``queries`` ``[B, steps, q]``. The mechanism runs
from zero alignments for ``steps`` steps in a ``while_loop``, each step's previous alignments being the last
step's. Variables relative to the builder's scope::

    memory_layer/kernel                                         [E, units]
    decoder/bahdanau_attention/query_layer/kernel               [q, units]
    decoder/bahdanau_attention/attention_v                      [units]
    (Mimic2LocationAttention: decoder/location_sensitive_attention/ instead, plus)
    decoder/location_sensitive_attention/location_conv/kernel   [kernel_size, 1, filters]
    decoder/location_sensitive_attention/location_layer/kernel  [filters, units]

Outputs ``alignments`` ``[B, T, steps]``, ``contexts`` ``[B, steps, E]``.

A default-size checkpoint (the demo's "real checkpoint made by the legacy reference"; seeded random weights, the
originals' variable names under ``model/inference``)::

    python -m parity_tests.legacy.builders_tacotron1 OUT_DIR [--preset keithito|mimic2] [--layout LAYOUT]

writes ``OUT_DIR/model.ckpt.{index,data-00000-of-00001,meta}``, ``OUT_DIR/checkpoint`` and
``OUT_DIR/hparams.json`` (the resolved hparams and layout): :func:`write_default_checkpoint`, which runs
:func:`default_checkpoint_spec` (free running for ``max_iters=2`` steps; the runner saves ``model.ckpt`` in its
out_dir before running the graph) through ``parity_tests.reference.run_legacy``.
"""
from __future__ import annotations

import json
import os
import shutil
import sys


def _noise(inputs, hp):
    """The spec's ``noise_masks`` dict from the ``noise/...`` inputs (groups absent stay absent)."""
    noise = {}
    for group in ("encoder_prenet", "decoder_prenet"):
        masks = [inputs.get(f"noise/{group}/{i}") for i in range(len(hp.prenet_depths))]
        if any(m is not None for m in masks):
            noise[group] = masks
    unknown = sorted(k for k in inputs if k.startswith("noise/") and k.split("/")[1] not in noise)
    if unknown:
        raise ValueError(f"unused noise inputs {unknown}")
    return noise


def _without_autograph(build):
    """Runs ``build`` with AutoGraph off: TF 2's legacy layers would otherwise convert every layer's ``call``
    (TF 1 never did; the graph is the same) -- a quarter of a whole model's build time."""
    import functools

    @functools.wraps(build)
    def wrapped(*args):
        import tensorflow as tf

        return tf.autograph.experimental.do_not_convert(build)(*args)

    return wrapped


@_without_autograph
def build_tacotron1(config, inputs, training, options):
    """Builds the whole model (and, with ``options["loss"]``, its loss and gradients) at the current scope."""
    import tensorflow as tf

    from speechblocks import resolve_tacotron1_hparams

    from .tf1_tacotron1 import default_layout, tacotron1, tacotron1_loss

    v1 = tf.compat.v1
    hp = resolve_tacotron1_hparams(config.get("hparams"))
    layout = config.get("layout") or default_layout(hp)
    max_iters = int(hp.max_iters if options.get("max_iters") is None else options["max_iters"])
    if max_iters <= 0:
        raise ValueError("max_iters must be > 0")
    scope = v1.get_variable_scope().name
    prefix = scope + "/" if scope else ""
    outputs = tacotron1(hp, layout, inputs["inputs"], inputs["input_lengths"], training,
                        mel_targets=inputs.get("mel_targets"), max_iters=max_iters, noise=_noise(inputs, hp),
                        mask_memory=bool(config.get("mask_memory", False)))
    if options.get("loss"):
        if "mel_targets" not in inputs or "linear_targets" not in inputs:
            raise ValueError("options['loss'] needs mel_targets and linear_targets")
        losses = tacotron1_loss(hp, outputs, inputs["mel_targets"], inputs["linear_targets"])
        outputs.update({f"loss/{k}": t for k, t in losses.items()})
        if options.get("gradients", True):
            variables = [v for v in v1.trainable_variables() if v.op.name.startswith(prefix)]
            for v, g in zip(variables, tf.gradients(losses["loss"], variables)):
                g = tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                outputs[f"grad/{v.op.name[len(prefix):]}"] = g
    return "", outputs


def _build_mechanism(config, inputs, located):
    import tensorflow as tf

    from .tf1_tacotron1 import BahdanauAttention, LocationSensitiveAttention, attend

    v1 = tf.compat.v1
    memory, queries = inputs["memory"], inputs["queries"]
    lengths = inputs["memory_lengths"] if config.get("mask_memory", False) else None
    units = int(config.get("units", 256))
    if located:
        mechanism = LocationSensitiveAttention(units, memory, lengths, filters=int(config.get("filters", 20)),
                                               kernel_size=int(config.get("kernel_size", 7)))
    else:
        mechanism = BahdanauAttention(units, memory, lengths)
    batch_size, steps = tf.shape(queries)[0], tf.shape(queries)[1]
    with v1.variable_scope("decoder"):
        arrays0 = tuple(tf.TensorArray(tf.float32, size=0, dynamic_size=True) for _ in range(2))

        def body(time, previous, align_ta, context_ta):
            context, alignments = attend(mechanism, queries[:, time], previous)
            return time + 1, alignments, align_ta.write(time, alignments), context_ta.write(time, context)

        result = v1.while_loop(lambda time, *rest: time < steps, body,
                               (tf.constant(0, dtype=tf.int32), mechanism.initial_alignments(batch_size), *arrays0))
    align_ta, context_ta = result[2:]
    return "", {"alignments": tf.transpose(align_ta.stack(), [1, 2, 0]),
                "contexts": tf.transpose(context_ta.stack(), [1, 0, 2])}


@_without_autograph
def build_bahdanau(config, inputs, training, options):
    """``memory_layer`` at the current scope, the steps inside ``variable_scope("decoder")``."""
    return _build_mechanism(config, inputs, located=False)


@_without_autograph
def build_location(config, inputs, training, options):
    """mimic2's location-sensitive attention, scoped as :func:`build_bahdanau`."""
    return _build_mechanism(config, inputs, located=True)


BUILDERS = {"Tacotron1": build_tacotron1, "BahdanauAttention": build_bahdanau,
            "Mimic2LocationAttention": build_location}


# -- a default-size checkpoint (main process) ---------------------------------------------------------------------
def default_checkpoint_spec(preset="keithito", layout=None, max_iters=2, seed=0, n_inputs=12):
    """A ``LegacySpec`` of the default-size model of ``preset`` (free running, ``max_iters`` steps, one input of
    ``n_inputs`` symbols) under ``model/inference``; its result's ``checkpoint`` is the saved ``model.ckpt``."""
    import numpy as np

    from parity_tests.reference import LegacySpec

    rng = np.random.default_rng(seed)
    ins = {"inputs": rng.integers(1, 149, (1, n_inputs)).astype(np.int32),
           "input_lengths": np.array([n_inputs], np.int32)}
    return LegacySpec("Tacotron1", {"hparams": preset, "layout": layout}, ins, scope="model/inference", seed=seed,
                      options={"max_iters": max_iters})


def write_default_checkpoint(out_dir, preset="keithito", layout=None, max_iters=2, seed=0, run_legacy=None):
    """Builds, fills (seeded) and saves the default-size model; copies ``model.ckpt.*`` and ``checkpoint`` into
    ``out_dir`` with ``hparams.json``. Returns the checkpoint prefix ``out_dir/model.ckpt``. ``run_legacy``: the
    runner of the spec (default ``parity_tests.reference.run_legacy``; ``make demo`` passes one of its own legacy
    subprocess)."""
    from speechblocks import resolve_tacotron1_hparams

    if run_legacy is None:
        from parity_tests.reference import run_legacy
    result = run_legacy([default_checkpoint_spec(preset, layout, max_iters, seed)])[0]
    src = os.path.dirname(result.checkpoint)
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(src):
        if name.startswith("model.ckpt"):
            shutil.copy2(os.path.join(src, name), os.path.join(out_dir, name))
    with open(os.path.join(out_dir, "checkpoint"), "w") as f:  # the Saver's holds the absolute temporary path
        f.write('model_checkpoint_path: "model.ckpt"\nall_model_checkpoint_paths: "model.ckpt"\n')
    hp = resolve_tacotron1_hparams(preset)
    with open(os.path.join(out_dir, "hparams.json"), "w") as f:
        json.dump({"hparams": hp.to_dict(), "layout": layout or ("mimic2" if hp.variant == "mimic2"
                                                                 else "keithito-20180906")}, f, indent=1)
    return os.path.join(out_dir, "model.ckpt")


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write a default-size Tacotron-1 TF1 checkpoint (random weights).")
    parser.add_argument("out_dir")
    parser.add_argument("--preset", default="keithito", choices=("keithito", "mimic2"))
    parser.add_argument("--layout", default=None, choices=("keithito-20170720", "keithito-20180906", "mimic2"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(write_default_checkpoint(args.out_dir, args.preset, args.layout, seed=args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
