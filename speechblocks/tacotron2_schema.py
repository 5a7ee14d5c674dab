"""The whole Tacotron-2's TF1 variables: names and shapes from hparams, and hparams from shapes.

Names are relative to ``Tacotron_model/inference/`` exactly as the TF1 graph creates them (docs/ARCHITECTURE.md, TF1
names). :func:`tf1_variable_shapes` lists every variable a model with given hparams holds; :func:`infer_hparams`
reads back what the shapes tell (``Tacotron2.from_tf1_checkpoint``); :func:`check_tf1_shapes` compares the
two and lists every mismatch. Pure Python: imports no framework.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from .errors import InputError
from .tacotron2_hparams import Tacotron2HParams, resolve_hparams

__all__ = ["tf1_variable_shapes", "infer_hparams", "check_tf1_shapes", "checkpoint_hparams", "is_regularized",
           "INFERABLE", "ATTENTION_SCOPE", "MODEL_SCOPE", "REGULARIZATION_EXCLUDED", "conv_bn_shapes", "dense_shapes",
           "lstm_shapes", "MODEL_BLOCK_ATTRIBUTES", "MODEL_PARTS", "model_block", "parameters_by_part",
           "matching_preset", "HParamsMismatchError"]

Shape = tuple[int, ...]
MODEL_SCOPE = "Tacotron_model/inference"
ATTENTION_SCOPE = "decoder/Location_Sensitive_Attention"
#: substrings of a TF1 variable's full name that keep it out of ``add_loss``'s L2 regularisation (the original's list)
REGULARIZATION_EXCLUDED = ("bias", "Bias", "_projection", "inputs_embedding", "RNN", "LSTM")

#: hparams the variable shapes determine (the rest -- rates, stop rule, max_iters, masking, smoothing,
#: cumulative weights, batch-norm position, clipping, loss settings -- come from the preset or the caller)
INFERABLE = ("n_symbols", "embedding_dim", "enc_conv_num_layers", "enc_conv_kernel_size", "enc_conv_channels",
             "encoder_lstm_units", "speaker_embedding_size", "attention_dim", "attention_filters", "attention_kernel",
             "prenet_layers", "decoder_layers", "decoder_lstm_units", "num_mels", "outputs_per_step",
             "postnet_num_layers", "postnet_kernel_size", "postnet_channels", "predict_linear", "num_freq",
             "cbhg_kernels", "cbhg_conv_channels", "cbhg_projection", "cbhg_projection_kernel_size",
             "cbhg_highwaynet_layers", "cbhg_highway_units", "cbhg_rnn_units")


def is_regularized(tf1_name: str) -> bool:
    """True when the original ``add_loss`` regularises the variable of this name (relative to :data:`MODEL_SCOPE`):
    its full name contains none of :data:`REGULARIZATION_EXCLUDED`."""
    full = f"{MODEL_SCOPE}/{tf1_name}"
    return not any(s in full for s in REGULARIZATION_EXCLUDED)


def conv_bn_shapes(prefix: str, k: int, cin: int, cout: int) -> dict[str, Shape]:
    return {f"{prefix}/conv1d/kernel": (k, cin, cout), f"{prefix}/conv1d/bias": (cout,),
            **{f"{prefix}/batch_normalization/{n}": (cout,)
               for n in ("gamma", "beta", "moving_mean", "moving_variance")}}


def dense_shapes(prefix: str, cin: int, cout: int, bias: bool = True) -> dict[str, Shape]:
    out = {f"{prefix}/kernel": (cin, cout)}
    if bias:
        out[f"{prefix}/bias"] = (cout,)
    return out


def lstm_shapes(prefix: str, cin: int, units: int) -> dict[str, Shape]:
    return {f"{prefix}/kernel": (cin + units, 4 * units), f"{prefix}/bias": (4 * units,)}


def tf1_variable_shapes(hp: Tacotron2HParams) -> dict[str, Shape]:
    """``{TF1 name relative to Tacotron_model/inference/: shape}`` of every trainable and batch-norm variable."""
    out: dict[str, Shape] = {"inputs_embedding": (hp.n_symbols, hp.embedding_dim)}
    ch, cin = hp.enc_conv_channels, hp.embedding_dim
    for i in range(hp.enc_conv_num_layers):
        out.update(conv_bn_shapes(f"encoder_convolutions/conv_layer_{i + 1}_encoder_convolutions",
                                  hp.enc_conv_kernel_size,
                            cin if i == 0 else ch, ch))
    u = hp.encoder_lstm_units
    for d in ("fw", "bw"):
        out.update(lstm_shapes(f"encoder_LSTM/bidirectional_rnn/{d}/encoder_{d}_LSTM", ch, u))
    mem, att = hp.memory_size, hp.attention_dim
    out["memory_layer/kernel"] = (mem, att)
    du = hp.decoder_lstm_units
    out.update({
        f"{ATTENTION_SCOPE}/query_layer/kernel": (du, att),
        f"{ATTENTION_SCOPE}/location_features_convolution/kernel": (hp.attention_kernel, 1, hp.attention_filters),
        f"{ATTENTION_SCOPE}/location_features_convolution/bias": (hp.attention_filters,),
        f"{ATTENTION_SCOPE}/location_features_layer/kernel": (hp.attention_filters, att),
        f"{ATTENTION_SCOPE}/attention_variable_projection": (att,),
        f"{ATTENTION_SCOPE}/attention_bias": (att,),
    })
    prev = hp.num_mels
    for i, size in enumerate(hp.prenet_layers):
        out.update(dense_shapes(f"decoder/decoder_prenet/dense_{i + 1}", prev, size))
        prev = size
    for k in range(hp.decoder_layers):
        out.update(lstm_shapes(f"decoder/decoder_LSTM/multi_rnn_cell/cell_{k}/decoder_LSTM_{k + 1}",
                         hp.prenet_layers[-1] + mem if k == 0 else du, du))
    r, m = hp.outputs_per_step, hp.num_mels
    out.update(dense_shapes("decoder/linear_transform_projection/projection_linear_transform_projection", du + mem,
                            m * r))
    out.update(dense_shapes("decoder/stop_token_projection/projection_stop_token_projection", du + mem, r))
    pch = hp.postnet_channels
    for j, i in enumerate(list(range(1, hp.postnet_num_layers)) + [5]):
        out.update(conv_bn_shapes(f"postnet_convolutions/conv_layer_{i}_postnet_convolutions", hp.postnet_kernel_size,
                            m if j == 0 else pch, pch))
    out.update(dense_shapes("postnet_projection/projection_postnet_projection", pch, m))
    if hp.predict_linear:
        s = "CBHG_postnet"
        for k in range(1, hp.cbhg_kernels + 1):
            out.update(conv_bn_shapes(f"{s}/conv_bank/conv1d_{k}", k, m, hp.cbhg_conv_channels))
        pk = hp.cbhg_projection_kernel_size
        out.update(conv_bn_shapes(f"{s}/proj1", pk, hp.cbhg_kernels * hp.cbhg_conv_channels, hp.cbhg_projection))
        out.update(conv_bn_shapes(f"{s}/proj2", pk, hp.cbhg_projection, m))
        hu, ru = hp.cbhg_highway_units, hp.cbhg_rnn_units
        if m != hu:
            out.update(dense_shapes(f"{s}/dense", m, hu))
        for n in range(1, hp.cbhg_highwaynet_layers + 1):
            out.update(dense_shapes(f"{s}/{s}_highwaynet_{n}/H", hu, hu))
            out.update(dense_shapes(f"{s}/{s}_highwaynet_{n}/T", hu, hu))
        for d, name in (("fw", "forward"), ("bw", "backward")):
            cell = f"{s}/bidirectional_rnn/{d}/{s}_{name}_RNN"
            out.update(dense_shapes(f"{cell}/gates", hu + ru, 2 * ru))
            out.update(dense_shapes(f"{cell}/candidate", hu + ru, ru))
        out.update(dense_shapes("cbhg_linear_specs_projection/projection_cbhg_linear_specs_projection", 2 * ru,
                          hp.num_freq))
    return out


class _Shapes:
    def __init__(self, shapes: Mapping[str, Shape]):
        self.shapes = {k: tuple(int(d) for d in v) for k, v in shapes.items()}
        self.problems: list[str] = []

    def get(self, name: str, rank: int) -> Shape | None:
        if name not in self.shapes:
            self.problems.append(f"missing variable {name!r}")
            return None
        s = self.shapes[name]
        if len(s) != rank:
            self.problems.append(f"variable {name!r} has shape {list(s)}, expected rank {rank}")
            return None
        return s

    def count(self, pattern: str, start: int = 1) -> int:
        rx = re.compile(pattern)
        found = sorted({int(m.group(1)) for k in self.shapes for m in [rx.fullmatch(k)] if m})
        n = 0
        while start + n in found:
            n += 1
        return n


def infer_hparams(shapes: Mapping[str, Shape]) -> dict:
    """The hparams the variable shapes determine (:data:`INFERABLE`), from ``{relative name: shape}``.

    Raises:
        ValueError: listing every variable needed for the inference that is absent or of the wrong rank.
    """
    s = _Shapes(shapes)
    hp: dict = {}
    emb = s.get("inputs_embedding", 2)
    if emb:
        hp["n_symbols"], hp["embedding_dim"] = emb
    n_conv = s.count(r"encoder_convolutions/conv_layer_(\d+)_encoder_convolutions/conv1d/kernel")
    hp["enc_conv_num_layers"] = n_conv
    conv = s.get("encoder_convolutions/conv_layer_1_encoder_convolutions/conv1d/kernel", 3)
    if conv:
        hp["enc_conv_kernel_size"], hp["enc_conv_channels"] = (conv[0],), conv[2]
    enc = s.get("encoder_LSTM/bidirectional_rnn/fw/encoder_fw_LSTM/kernel", 2)
    if enc:
        hp["encoder_lstm_units"] = enc[1] // 4
    mem = s.get("memory_layer/kernel", 2)
    if mem:
        hp["attention_dim"] = mem[1]
        if enc:
            extra = mem[0] - 2 * (enc[1] // 4)
            hp["speaker_embedding_size"] = extra if extra > 0 else None
    loc = s.get(f"{ATTENTION_SCOPE}/location_features_convolution/kernel", 3)
    if loc:
        hp["attention_kernel"], hp["attention_filters"] = (loc[0],), loc[2]
    n_pre = s.count(r"decoder/decoder_prenet/dense_(\d+)/kernel")
    sizes = []
    for i in range(n_pre):
        k = s.get(f"decoder/decoder_prenet/dense_{i + 1}/kernel", 2)
        if k:
            sizes.append(k[1])
            if i == 0:
                hp["num_mels"] = k[0]
    hp["prenet_layers"] = sizes
    n_dec = s.count(r"decoder/decoder_LSTM/multi_rnn_cell/cell_(\d+)/decoder_LSTM_\d+/kernel", start=0)
    hp["decoder_layers"] = n_dec
    dec = s.get("decoder/decoder_LSTM/multi_rnn_cell/cell_0/decoder_LSTM_1/kernel", 2)
    if dec:
        hp["decoder_lstm_units"] = dec[1] // 4
    stop = s.get("decoder/stop_token_projection/projection_stop_token_projection/kernel", 2)
    if stop:
        hp["outputs_per_step"] = stop[1]
    n_post = len({int(m.group(1)) for k in s.shapes
                  for m in [re.fullmatch(r"postnet_convolutions/conv_layer_(\d+)_postnet_convolutions/conv1d/kernel",
                                         k)]
                  if m})
    hp["postnet_num_layers"] = n_post
    post = s.get("postnet_convolutions/conv_layer_1_postnet_convolutions/conv1d/kernel", 3)
    if post:
        hp["postnet_kernel_size"], hp["postnet_channels"] = (post[0],), post[2]
    hp["predict_linear"] = any(k.startswith("CBHG_postnet/") for k in s.shapes)
    if hp["predict_linear"]:
        c = "CBHG_postnet"
        hp["cbhg_kernels"] = s.count(rf"{c}/conv_bank/conv1d_(\d+)/conv1d/kernel")
        bank = s.get(f"{c}/conv_bank/conv1d_1/conv1d/kernel", 3)
        if bank:
            hp["cbhg_conv_channels"] = bank[2]
        p1 = s.get(f"{c}/proj1/conv1d/kernel", 3)
        if p1:
            hp["cbhg_projection_kernel_size"], hp["cbhg_projection"] = p1[0], p1[2]
        hp["cbhg_highwaynet_layers"] = s.count(rf"{c}/{c}_highwaynet_(\d+)/H/kernel")
        hw = s.get(f"{c}/{c}_highwaynet_1/H/kernel", 2) if hp["cbhg_highwaynet_layers"] else None
        gates = s.get(f"{c}/bidirectional_rnn/fw/{c}_forward_RNN/gates/kernel", 2)
        if gates:
            hp["cbhg_rnn_units"] = gates[1] // 2
            hp["cbhg_highway_units"] = hw[1] if hw else gates[0] - gates[1] // 2
        lin = s.get("cbhg_linear_specs_projection/projection_cbhg_linear_specs_projection/kernel", 2)
        if lin:
            hp["num_freq"] = lin[1]
    for name, n in (("encoder convolution layers", n_conv), ("prenet layers", n_pre), ("decoder LSTM layers", n_dec),
                    ("postnet layers", n_post)):
        if n == 0:
            s.problems.append(f"no {name} found")
    if s.problems:
        raise ValueError("cannot infer the Tacotron-2 hparams from the checkpoint's variables: "
                         + "; ".join(s.problems))
    return hp


def check_tf1_shapes(shapes: Mapping[str, Shape], hp: Tacotron2HParams, ignore=()) -> list[str]:
    """Every mismatch between a checkpoint's ``{relative name: shape}`` and the model ``hp`` describes.

    Args:
        shapes: the checkpoint's model variables (optimizer slots removed), names relative to the inference scope.
        hp: the model's hparams.
        ignore: names not to report as unexpected.

    Returns:
        one message per missing, mis-shaped or unexpected variable (empty when they agree).
    """
    return shape_problems(shapes, tf1_variable_shapes(hp), "the hparams", ignore)


def shape_problems(shapes: Mapping[str, Shape], expected: Mapping[str, Shape], implied_by: str,
                   ignore=()) -> list[str]:
    """One message per variable of ``expected`` missing from ``shapes`` or shaped otherwise (what ``implied_by``
    implies), and per variable of ``shapes`` not expected (unless in ``ignore``), in that order."""
    problems = []
    for k, shape in expected.items():
        if k not in shapes:
            problems.append(f"missing variable {k!r} (expected shape {list(shape)})")
        elif tuple(shapes[k]) != tuple(shape):
            problems.append(f"variable {k!r} has shape {list(shapes[k])}, {implied_by} imply {list(shape)}")
    problems += [f"unexpected variable {k!r} (shape {list(shapes[k])})" for k in sorted(shapes)
                 if k not in expected and k not in ignore]
    return problems


def checkpoint_hparams(shapes: Mapping[str, Shape], hparams=None, overrides: Mapping | None = None,
                       source: str = "the checkpoint") -> Tacotron2HParams:
    """The hparams of the model a checkpoint holds (``Tacotron2.from_tf1_checkpoint`` in both frameworks).

    Args:
        shapes: ``{name relative to Tacotron_model/inference/: shape}`` of the checkpoint's model variables.
        hparams: ``None`` -- the preset the shapes point to (``"rtvc"`` with a speaker embedding, else
            ``"rayhane"``) with every size read from the shapes -- or what the caller gives (its sizes must agree).
        overrides: hparams by original name, applied last.
        source: how error messages name the checkpoint.

    Raises:
        ValueError: the shapes lack what the inference needs, or the hparams contradict them (one message listing
            every mismatch).
    """
    overrides = dict(overrides or {})
    inferred = infer_hparams(shapes)
    n_symbols = inferred.pop("n_symbols")
    if hparams is None:
        preset = "rtvc" if inferred.get("speaker_embedding_size") else "rayhane"
        hp = resolve_hparams(preset, n_symbols, **{**inferred, **overrides})
    else:
        hp = resolve_hparams(hparams, n_symbols, **overrides)
    problems = check_tf1_shapes(shapes, hp)
    if problems:
        raise HParamsMismatchError(source, _mismatch_cause(shapes, hp, inferred, problems), problems)
    return hp


class HParamsMismatchError(InputError):
    """The hparams given contradict a checkpoint's shapes.

    The message is one line that names the cause first (the hparams whose values the shapes contradict, or the
    scopes of the variables that do not fit) and stays short; every mismatch is in :attr:`problems`
    (``speechblocks ... --debug`` prints them).

    Attributes:
        source: how the checkpoint is named.
        cause: the first sentence.
        problems: one line per missing, mis-shaped or unexpected variable.
    """

    def __init__(self, source: str, cause: str, problems: list[str]):
        self.source, self.cause, self.problems = source, cause, list(problems)
        listed = ("; ".join(self.problems) if len(self.problems) <= 2
                  else f"{len(self.problems)} mismatching variables; --debug lists them")
        super().__init__(f"the hparams contradict {source}: {cause} ({listed})")

    def details(self) -> str:
        """Every mismatch, one per line."""
        return "\n".join(f"  - {p}" for p in self.problems)


#: ``(scope prefixes, the hparam whose value decides whether the model has them)``
_OPTIONAL_PARTS = ((("CBHG_postnet/", "cbhg_linear_specs_projection/"), "predict_linear"),)


def _scope(name: str) -> str:
    return name.split("/", 1)[0] + "/" if "/" in name else name


def _mismatch_cause(shapes, hp: Tacotron2HParams, inferred: dict, problems: list[str]) -> str:
    """One sentence on why ``hp`` does not fit ``shapes``: a part the hparams leave out or expect, the hparams
    the shapes read differently, or the scopes of the misfits."""
    expected = tf1_variable_shapes(hp)
    extra = sorted(k for k in shapes if k not in expected)
    absent = sorted(k for k in expected if k not in shapes)
    for prefixes, flag in _OPTIONAL_PARTS:
        n_extra = sum(k.startswith(prefixes) for k in extra)
        n_absent = sum(k.startswith(prefixes) for k in absent)
        under = " and ".join(prefixes)
        if n_extra and not getattr(hp, flag):
            return (f"the hparams say {flag}=False, but the checkpoint holds the post-CBHG ({n_extra} variables under "
                    f"{under}): drop --hparams or --set {flag}=true")
        if n_absent and getattr(hp, flag) and not any(k.startswith(prefixes) for k in shapes):
            return (f"the hparams say {flag}=True, but the checkpoint has no post-CBHG (no variable under {under}): "
                    f"drop --hparams or --set {flag}=false")
    said = []
    for name, value in inferred.items():
        ours = getattr(hp, name, None)
        if isinstance(value, tuple) and len(value) == 1:
            value = value[0]
        if isinstance(value, list):
            value, ours = tuple(value), tuple(ours) if isinstance(ours, (list, tuple)) else ours
        if name in _fields() and ours != value and not (value is None and not ours):
            said.append(f"{name}={ours!r} where the shapes say {value!r}")
    if said:
        return "the hparams say " + ", ".join(said[:4]) + (" ..." if len(said) > 4 else "")
    scopes = sorted({_scope(k) for k in extra + absent})
    listed = ", ".join(scopes[:4]) + (" ..." if len(scopes) > 4 else "")
    return f"{len(extra)} unexpected and {len(absent)} missing variable(s) under {listed}; first: {problems[0]}"


def _fields() -> set[str]:
    return {f.name for f in dataclasses.fields(Tacotron2HParams)}


#: the blocks of the whole model: ``{block path (relative to MODEL_SCOPE): attribute path}`` -- the same attribute
#: names in the Keras model and the torch module (``model.decoder.prenet`` ...); the CBHG pair only with
#: ``predict_linear``
MODEL_BLOCK_ATTRIBUTES = {
    "encoder_convolutions": "encoder_convolutions",
    "encoder_LSTM": "encoder_lstm",
    "decoder/decoder_prenet": "decoder.prenet",
    "decoder/decoder_LSTM": "decoder.decoder_lstm",
    ATTENTION_SCOPE: "decoder.attention",
    "decoder/linear_transform_projection": "decoder.frame_projection",
    "decoder/stop_token_projection": "decoder.stop_projection",
    "postnet_convolutions": "postnet",
    "postnet_projection": "postnet_projection",
    "CBHG_postnet": "post_cbhg",
    "cbhg_linear_specs_projection": "linear_projection",
}

#: the parts ``speechblocks inspect`` counts parameters by: ``(part, name prefixes)``
MODEL_PARTS = (
    ("embedding", ("inputs_embedding",)),
    ("encoder", ("encoder_convolutions/", "encoder_LSTM/")),
    ("attention", ("memory_layer/", ATTENTION_SCOPE + "/")),
    ("decoder", ("decoder/",)),
    ("postnet", ("postnet_convolutions/", "postnet_projection/")),
    ("post-CBHG (linear)", ("CBHG_postnet/", "cbhg_linear_specs_projection/")),
)


def model_block(model, block_path: str):
    """The block object of ``model`` (Keras or torch Tacotron2) at ``block_path`` (:data:`MODEL_BLOCK_ATTRIBUTES`)."""
    obj = model
    for attr in MODEL_BLOCK_ATTRIBUTES[block_path].split("."):
        obj = getattr(obj, attr)
    return obj


def parameters_by_part(shapes: Mapping[str, Shape]) -> dict[str, int]:
    """Number of scalars per part of the model (:data:`MODEL_PARTS`), from ``{relative name: shape}``; a part
    without variables is left out, names of no part count as ``"other"``."""
    out: dict[str, int] = {}
    for name, shape in shapes.items():
        n = 1
        for d in shape:
            n *= int(d)
        part = next((p for p, prefixes in MODEL_PARTS if any(name.startswith(x) for x in prefixes)), "other")
        out[part] = out.get(part, 0) + n
    return {p: out[p] for p, _ in MODEL_PARTS + (("other", ()),) if p in out}


def matching_preset(shapes: Mapping[str, Shape]) -> str | None:
    """The preset (``"rtvc"``, ``"rayhane"``) whose default sizes produce exactly these variables, else ``None``."""
    from .tacotron2_hparams import TACOTRON2_PRESETS

    try:
        n_symbols = infer_hparams(shapes)["n_symbols"]
    except (ValueError, KeyError):
        return None
    for name in TACOTRON2_PRESETS:
        if not check_tf1_shapes(shapes, resolve_hparams(name, n_symbols)):
            return name
    return None
