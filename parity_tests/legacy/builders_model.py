"""Legacy builder of a whole Tacotron-2 model's blocks (``Tacotron2Model``), for the migration tests.

Every block of :data:`speechblocks.migration.schema.BLOCK_KINDS` is built with the legacy TF1 graph
functions under its real scope (``Tacotron_model/inference/<block path>``), each on its own input
(``"<block path>/inputs"``, plus ``"encoder_LSTM/input_lengths"`` / ``"CBHG_postnet/input_lengths"``),
so every block's output can be compared with its migrated Keras and torch twins. Plain variables for
``inputs_embedding``, ``memory_layer`` and ``decoder/Location_Sensitive_Attention/...`` are created
(and joined to the loss, so an Adam step gives them slots as a trained checkpoint has) to exercise the
"unmigrated" listing.

``config``: ``{"blocks": {block_path: {"class_name", "config", "input_size"}}, "n_symbols": int,
"attention_dim": int}`` -- :func:`model_configs` gives Rayhane's and RTVC's.

``options`` (besides the runner's ``adam_step``):

* ``"model_scope"``: build under this scope here instead of under the spec's scope (give the spec
  ``scope=""``); needed by the two options below, which put variables outside the model scope.
* ``"doubled_adam_prefix"``: create an ``AdamOptimizer``'s slots inside ``variable_scope("Tacotron_model")``
  as Rayhane's training graph does, giving ``Tacotron_model/Tacotron_model/inference/.../Adam`` names
  and ``Tacotron_model/beta{1,2}_power``. The runner random-fills them (it cannot run this optimizer's
  step: it only runs its own), so their names are real and their values random.
* ``"ema"``: ``ExponentialMovingAverage`` shadows (``<var>/ExponentialMovingAverage``) of every trainable
  variable; the runner random-fills them too, so they differ from the raw weights.

Importing this module does not import TensorFlow (the main process imports it for :func:`model_configs`).
"""
from __future__ import annotations

import copy
import importlib

# (legacy module, function, extra input names) per block class
_LEGACY = {
    "EncoderConvolutions": ("tf1_blocks", "encoder_convolutions", ()),
    "EncoderRNN": ("tf1_recurrent", "encoder_rnn", ("input_lengths",)),
    "Prenet": ("tf1_blocks", "prenet", ()),
    "DecoderRNN": ("tf1_recurrent", "decoder_rnn_sequence", ()),
    "FrameProjection": ("tf1_blocks", "frame_projection", ()),
    "StopProjection": ("tf1_blocks", "stop_projection", ()),
    "Postnet": ("tf1_blocks", "postnet", ()),
    "CBHG": ("tf1_cbhg", "cbhg", ("input_lengths",)),
}


def _rayhane(r: int, context: int, num_mels: int = 80, num_freq: int = 1025, cbhg: bool = True) -> dict:
    blocks = {
        "encoder_convolutions": ("EncoderConvolutions", dict(kernel_size=5, channels=512, num_layers=3, drop_rate=0.5,
                                                             activation="relu"), 512),
        "encoder_LSTM": ("EncoderRNN", dict(size=256, zoneout=0.1), 512),
        "decoder/decoder_prenet": ("Prenet", dict(layers_sizes=[256, 256], drop_rate=0.5, activation="relu"), num_mels),
        "decoder/decoder_LSTM": ("DecoderRNN", dict(layers=2, size=1024, zoneout=0.1), 256 + context),
        "decoder/linear_transform_projection": ("FrameProjection", dict(shape=num_mels * r, activation=None),
                                                1024 + context),
        "decoder/stop_token_projection": ("StopProjection", dict(shape=r, activation="sigmoid"), 1024 + context),
        "postnet_convolutions": ("Postnet", dict(kernel_size=5, channels=512, num_layers=5, drop_rate=0.5,
                                                 activation="tanh"), num_mels),
        "postnet_projection": ("FrameProjection", dict(shape=num_mels, activation=None), 512),
    }
    if cbhg:
        blocks["CBHG_postnet"] = ("CBHG", dict(K=8, conv_channels=128, pool_size=2, projections=[256, num_mels],
                                               projection_kernel_size=3, n_highwaynet_layers=4, highway_units=128,
                                               rnn_units=128), num_mels)
        blocks["cbhg_linear_specs_projection"] = ("FrameProjection", dict(shape=num_freq, activation=None), 256)
    return {"blocks": {p: {"class_name": c, "config": dict(cfg, tf1_scope=p.rsplit("/", 1)[-1]), "input_size": n}
                       for p, (c, cfg, n) in blocks.items()},
            "n_symbols": 66, "attention_dim": 128, "context": context}


def model_configs(variant: str = "rayhane") -> dict:
    """The ``Tacotron2Model`` config of a real model's default hparams.

    ``"rayhane"``: Rayhane-mamah/Tacotron-2 (outputs_per_step 1, encoder outputs 512, so the decoder LSTM
    takes prenet 256 + context 512 = 768 and the projections 1024 + 512; post-CBHG to 1025 linear bins).
    ``"rtvc"``: the TF1 Real-Time-Voice-Cloning synthesizer (outputs_per_step 2; encoder outputs
    concatenated with the 256-d speaker embedding, so the decoder attends to 768-d inputs: LSTM input
    256 + 768, projections 1024 + 768; no post-CBHG, as ``predict_linear=False``).
    """
    if variant == "rayhane":
        return _rayhane(r=1, context=512)
    if variant == "rtvc":
        return _rayhane(r=2, context=768, cbhg=False)
    raise ValueError(f"unknown variant {variant!r}; expected 'rayhane' or 'rtvc'")


def shrink(config: dict, only: list[str] | None = None) -> dict:
    """A copy of ``config`` keeping only the block paths in ``only``."""
    config = copy.deepcopy(config)
    if only is not None:
        config["blocks"] = {p: e for p, e in config["blocks"].items() if p in only}
    return config


def _legacy_fn(class_name: str):
    module, fn, extra = _LEGACY[class_name]
    try:
        mod = importlib.import_module(f"{__package__}.{module}")
        return getattr(mod, fn), extra
    except (ImportError, AttributeError):
        return None, extra


def _build_blocks(config, inputs, training):
    import tensorflow as tf

    v1 = tf.compat.v1
    outputs = {}
    for path, entry in config["blocks"].items():
        fn, extra = _legacy_fn(entry["class_name"])
        if fn is None:
            raise RuntimeError(f"legacy graph function of {entry['class_name']} is not available yet")
        parents = path.split("/")[:-1]
        args = [inputs[f"{path}/inputs"]] + [inputs.get(f"{path}/{name}") for name in extra]
        scopes = [v1.variable_scope(p) for p in parents]
        for s in scopes:
            s.__enter__()
        try:
            out, masks = fn(*args, dict(entry["config"]), training)
        finally:
            for s in reversed(scopes):
                s.__exit__(None, None, None)
        outputs[f"{path}/outputs"] = out
        for i, m in enumerate(masks):
            outputs[f"mask/{path}/{i}"] = m
    # variables of the parts that are not blocks of this library (listed as "unmigrated")
    n_sym, att = config.get("n_symbols", 66), config.get("attention_dim", 128)
    context = config.get("context", 512)
    extras = [v1.get_variable("inputs_embedding", [n_sym, 512]),
              v1.get_variable("memory_layer/kernel", [context, att])]
    with v1.variable_scope("decoder/Location_Sensitive_Attention"):
        extras += [v1.get_variable("attention_variable_projection", [att]),
                   v1.get_variable("attention_bias", [att]),
                   v1.get_variable("query_layer/kernel", [1024, att]),
                   v1.get_variable("location_features_convolution/kernel", [31, 1, 32]),
                   v1.get_variable("location_features_convolution/bias", [32]),
                   v1.get_variable("location_features_layer/kernel", [32, att])]
    outputs["unmigrated/sum"] = tf.add_n([tf.reduce_sum(tf.square(v)) for v in extras])
    return outputs


def build_tacotron2_model(config, inputs, training, options):
    import tensorflow as tf

    v1 = tf.compat.v1
    model_scope = options.get("model_scope")
    if not model_scope:
        return "", _build_blocks(config, inputs, training)
    with v1.variable_scope(model_scope):
        outputs = _build_blocks(config, inputs, training)
    if options.get("doubled_adam_prefix"):
        loss = tf.add_n([tf.reduce_sum(tf.square(t)) for k, t in outputs.items()
                         if not k.startswith("mask/") and t.dtype.is_floating])
        with v1.variable_scope(model_scope.split("/")[0]):
            v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=v1.train.get_or_create_global_step())
    if options.get("ema"):
        model_vars = [v for v in v1.trainable_variables() if v.op.name.startswith(model_scope + "/")]
        v1.train.ExponentialMovingAverage(0.999).apply(model_vars)
    return model_scope, outputs


BUILDERS = {"Tacotron2Model": build_tacotron2_model}


def make_inputs(config: dict, batch: int = 2, time: int = 7, seed: int = 0) -> dict:
    """Random inputs of every block of ``config`` (numpy; lengths ``time`` and ``time - 2`` ...)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    lengths = np.maximum(1, time - 2 * np.arange(batch)).astype(np.int32)
    for path, entry in config["blocks"].items():
        out[f"{path}/inputs"] = rng.standard_normal((batch, time, entry["input_size"])).astype(np.float32)
        if _LEGACY[entry["class_name"]][2]:
            out[f"{path}/input_lengths"] = lengths
    return out
