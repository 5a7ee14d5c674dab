"""The Tacotron-1 family's TF1 variables: names and shapes of each checkpoint layout, and layout and hparams from
a checkpoint's shapes.

A keithito/tacotron or MycroftAI/mimic2 checkpoint holds its model under ``model/inference/`` (``train.py`` opens
``variable_scope('model')``, ``Tacotron.initialize`` opens ``'inference'``); every name here is relative to that
prefix, ``:0`` dropped. Three layouts were published or trained:

* ``"keithito-20180906"``: keithito since commit bc20c40 (2018-08-31; the ``tacotron-20180906`` checkpoint, the
  seed's code): ``DecoderPrenetWrapper(AttentionWrapper(GRUCell, BahdanauAttention))``. The pre-net sees the
  previous frame alone (``dense_1/kernel`` ``[num_mels, prenet_depths[0]]``) and the attention GRU
  ``concat(pre-net output, previous context)`` (``gates/kernel`` ``[prenet_depths[-1] + memory + attention_depth,
  2 * attention_depth]``).
* ``"keithito-20170720"``: keithito's 2017 code (``tacotron-20170720``, TF 1.2.0 by its ``requirements.txt``):
  ``AttentionWrapper(DecoderPrenetWrapper(GRUCell), BahdanauAttention)``. ``AttentionWrapper`` concatenates the
  input with the previous context *before* calling its cell, so the pre-net sees ``concat(previous frame,
  previous context)``: ``dense_1/kernel`` is ``[num_mels + memory, 256]`` and the GRU's input is the pre-net's
  output alone (``gates/kernel`` ``[128 + 256, 512]``). The context's width is the memory's (the encoder outputs,
  ``encoder_depth`` = 256), not ``attention_depth``: the AttentionWrapper is built without an attention layer, so
  its ``attention`` is the alignment-weighted sum of the memory values (TF contrib ``attention_wrapper.py``:
  ``_attention_layer_size = sum(values.shape[-1])``). DESIGN §11's ``[num_mels + attention_depth, 256]`` gives the
  same numbers only because both are 256 in every keithito preset.
* ``"mimic2"``: the 2017 nesting with mimic2's ``LocationSensitiveAttention`` (a ``BahdanauAttention`` subclass)
  and its fixed sizes; its embedding is 512 wide.

Every variable, with ``C = decoder/output_projection_wrapper/multi_rnn_cell/cell_0/output_projection_wrapper/
concat_output_and_attention_wrapper``::

    embedding                                              [n_symbols, embed_depth]
    prenet/dense_{1,2}/{kernel,bias}                       encoder pre-net
    encoder_cbhg/conv_bank/conv1d_{1..16}/{conv1d/{kernel,bias}, batch_normalization/{gamma,beta,moving_mean,
        moving_variance}}, encoder_cbhg/proj_{1,2}/..., encoder_cbhg/dense/{kernel,bias} (only when the pre-net's
        width differs from encoder_depth // 2), encoder_cbhg/highway_{1..4}/{H,T}/{kernel,bias},
        encoder_cbhg/bidirectional_rnn/{fw,bw}/gru_cell/{gates,candidate}/{kernel,bias}
    memory_layer/kernel                                    [memory, attention_depth] (no bias)
    20180906: C/decoder_prenet_wrapper/decoder_prenet/dense_{1,2}/..., C/decoder_prenet_wrapper/attention_wrapper/
        gru_cell/..., C/decoder_prenet_wrapper/attention_wrapper/bahdanau_attention/{query_layer/kernel, attention_v}
    20170720: C/attention_wrapper/decoder_prenet_wrapper/decoder_prenet/dense_{1,2}/...,
        C/attention_wrapper/decoder_prenet_wrapper/gru_cell/..., C/attention_wrapper/bahdanau_attention/...
    mimic2:   as 20170720 with C/attention_wrapper/location_sensitive_attention/{query_layer/kernel, attention_v,
        location_conv/kernel [7, 1, 20], location_layer/kernel [20, attention_depth]}
    decoder/output_projection_wrapper/multi_rnn_cell/cell_0/output_projection_wrapper/{kernel,bias}
                                                           [attention_depth + memory, decoder_depth]
    decoder/output_projection_wrapper/multi_rnn_cell/cell_{1,2}/gru_cell/{gates,candidate}/{kernel,bias}
    decoder/output_projection_wrapper/{kernel,bias}        [decoder_depth, num_mels * outputs_per_step]
    post_cbhg/... (K = 8, projections [256, num_mels], post_cbhg/dense [num_mels, postnet_depth // 2])
    dense/{kernel,bias}                                    [postnet_depth, num_freq] (the linear spectrogram)

The naming rules and their evidence:

* ``model/inference/`` + ``embedding``: keithito/tacotron issue #203 (a restore error
  ``_class=["loc:@model/inference/embedding"]`` with ``rhs shape= [149,256]`` from ``tacotron-20170720/model.ckpt``:
  the 149-symbol table and the embedding width).
* ``decoder`` (``dynamic_decode``'s default scope), ``output_projection_wrapper``, ``multi_rnn_cell/cell_0``: the
  restore error in keithito/tacotron issue #192 (``Key model/inference/decoder/output_projection_wrapper/
  multi_rnn_cell/cell_0/output_projection_wrapper/bias not found``); TF's ``MultiRNNCell.call`` opens
  ``"cell_%d"`` (``tensorflow/python/ops/rnn_cell_impl.py``).
* An ``RNNCell`` subclass opens a scope named by its class in snake case (``concat_output_and_attention_wrapper``,
  ``attention_wrapper``, ``decoder_prenet_wrapper``, ``gru_cell``), the inner cell's inside the wrapper's, and
  ``ResidualWrapper`` none (it overrides ``__call__`` and calls its cell with the caller's scope:
  ``rnn_cell_impl.py``, hence ``cell_1/gru_cell``). The whole 2017 nesting is listed verbatim by a keithito fork's
  ``train.py`` that selects gradients by scope (found with ``find_string "concat_output_and_attention_wrapper"``):
  ``model/inference/decoder/output_projection_wrapper/multi_rnn_cell/cell_0/output_projection_wrapper/
  concat_output_and_attention_wrapper/attention_wrapper/decoder_prenet_wrapper/decoder_prenet``, the same
  ``.../attention_wrapper/decoder_prenet_wrapper/gru_cell`` and ``.../attention_wrapper/bahdanau_attention``,
  ``.../cell_0/output_projection_wrapper/{kernel,bias}``, ``.../multi_rnn_cell/cell_{1,2}``,
  ``model/inference/decoder/output_projection_wrapper/{kernel,bias}``, ``model/inference/{prenet,encoder_cbhg,
  post_cbhg}``. Another keithito-based repository restores ``model/inference/dense`` and
  ``model/inference/memory_layer`` by name (``find_string "model/inference/memory_layer"``), and keithito-based
  freezing and TensorRT scripts take the linear output from the node ``model/inference/dense/BiasAdd``
  (``find_string "model/inference/dense"``): the post-CBHG's own dimension-fix dense (``post_cbhg/dense``) does not
  make the top-level one ``dense_1``. Which TF release those graphs came from is not known; for TF 1.2 (the
  ``tacotron-20170720`` checkpoint) the top-level ``dense`` is **unconfirmed**.
* The 20180906 nesting (``.../concat_output_and_attention_wrapper/decoder_prenet_wrapper/attention_wrapper/...``)
  follows from the same rules with bc20c40's order of wrappers; **no pasted list of it was found** (the TF
  reproduction below gives it).
* ``GRUCell``: ``gates/kernel`` ``[input + units, 2 * units]`` (columns r then u, bias initialised to 1.0) and
  ``candidate/kernel`` ``[input + units, units]`` (``rnn_cell_impl.py``); ``bidirectional_dynamic_rnn`` opens
  ``bidirectional_rnn/{fw,bw}`` (names such as ``bidirectional_rnn/bw/gru_cell/candidate/bias`` pasted in
  andabi/deep-voice-conversion issue #12). ``OutputProjectionWrapper`` creates ``kernel``/``bias`` in its own scope
  (contrib ``core_rnn_cell.py``; issue #192's key).
* ``BahdanauAttention`` (contrib ``attention_wrapper.py``): ``memory_layer`` and ``query_layer`` are
  ``Dense(use_bias=False)`` layers made at construction; ``memory_layer`` runs there, so its kernel sits where the
  mechanism was built (``model/inference/memory_layer/kernel``); ``query_layer`` first runs inside
  ``__call__``'s ``variable_scope(None, "bahdanau_attention")`` together with ``get_variable("attention_v",
  [num_units])``. Pasted variable lists with exactly this shape of names: ``.../attention_wrapper/
  bahdanau_attention/query_layer/kernel:0 (110, 99)``, ``.../attention_v:0 (99,)`` and ``.../attention_wrapper/
  gru_cell/gates/kernel:0 (287, 220)`` (the GRU's kernel over ``[input; previous attention; h]``).
* mimic2's ``LocationSensitiveAttention.__call__`` opens ``variable_scope(None, 'location_sensitive_attention')``
  and runs ``location_conv``, ``location_layer`` and ``query_layer`` there and creates ``attention_v`` there
  (mimic2 ``models/attention.py``). **Not confirmed by a pasted list or a real mimic2 checkpoint**: derived from
  that code and TF's layer scoping only.
* ``tf.layers`` naming: a layer's scope is taken at its first call (``conv1d``, ``batch_normalization``,
  ``dense``; a second unnamed ``dense`` in another scope is again ``dense``). The names above were reproduced
  with TF 2.21's ``tf.compat.v1`` legacy cells and layers (``GRUCell``, ``MultiRNNCell``, ``ResidualWrapper``,
  ``bidirectional_dynamic_rnn``, ``tf.compat.v1.layers``) and stand-in ``RNNCell`` subclasses with contrib's
  structure for the wrappers contrib alone had (``AttentionWrapper``, ``OutputProjectionWrapper``,
  ``BahdanauAttention``): both keithito layouts came out exactly as listed.
* **Before TF 1.2** RNN cells named their variables ``weights``/``biases`` (TF 1.2 renamed them ``kernel``/``bias``;
  contrib ``rnn/python/tools/checkpoint_convert.py`` maps ``gru_cell/gates/weights`` -> ``gru_cell/gates/kernel``,
  ``output_projection_wrapper/biases`` -> ``output_projection_wrapper/bias`` ...). :func:`canonical_names` accepts
  both spellings for those variables. No keithito or mimic2 checkpoint should have them (``AttentionWrapper``
  arrived in TF 1.2 itself, and keithito's 2017 requirements pin TF 1.2.0): **unconfirmed**, accepted anyway.

Pure Python: imports no framework.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from .errors import InputError
from .tacotron1_hparams import TACOTRON1_PRESETS, Tacotron1HParams, resolve_tacotron1_hparams
from .tacotron2_hparams import TACOTRON2_PRESETS
from .tacotron2_schema import conv_bn_shapes, dense_shapes, shape_problems

__all__ = ["MODEL_SCOPE", "LAYOUTS", "tf1_variable_shapes", "infer_layout_and_hparams", "canonical_names",
           "attention_cell_scopes", "Tacotron1ShapesError", "ModelFamilyError", "check_preset_family",
           "TACOTRON2_SCOPE", "Tacotron1Found", "find_tacotron1"]

Shape = tuple[int, ...]
MODEL_SCOPE = "model/inference"
TACOTRON2_SCOPE = "Tacotron_model/inference"
LAYOUTS = ("keithito-20170720", "keithito-20180906", "mimic2")
DECODER_CELL = "decoder/output_projection_wrapper/multi_rnn_cell"
CONCAT = f"{DECODER_CELL}/cell_0/output_projection_wrapper/concat_output_and_attention_wrapper"
ENCODER_BANK, POSTNET_BANK = 16, 8


def attention_cell_scopes(layout: str) -> dict[str, str]:
    """The decoder pre-net's, the attention GRU's and the attention mechanism's scopes in a layout."""
    if layout not in LAYOUTS:
        raise ValueError(f"tacotron1 layout must be one of {list(LAYOUTS)}; got {layout!r}.")
    if layout == "keithito-20180906":
        outer = f"{CONCAT}/decoder_prenet_wrapper"
        return dict(prenet=f"{outer}/decoder_prenet", gru=f"{outer}/attention_wrapper/gru_cell",
                    attention=f"{outer}/attention_wrapper/bahdanau_attention")
    mechanism = "location_sensitive_attention" if layout == "mimic2" else "bahdanau_attention"
    return dict(prenet=f"{CONCAT}/attention_wrapper/decoder_prenet_wrapper/decoder_prenet",
                gru=f"{CONCAT}/attention_wrapper/decoder_prenet_wrapper/gru_cell",
                attention=f"{CONCAT}/attention_wrapper/{mechanism}")


def _gru(prefix: str, cin: int, units: int) -> dict[str, Shape]:
    return {**dense_shapes(f"{prefix}/gates", cin + units, 2 * units),
            **dense_shapes(f"{prefix}/candidate", cin + units, units)}


def _prenet(prefix: str, cin: int, sizes) -> dict[str, Shape]:
    out = {}
    for i, size in enumerate(sizes):
        out.update(dense_shapes(f"{prefix}/dense_{i + 1}", cin, size))
        cin = size
    return out


def _cbhg(scope: str, cin: int, bank: int, projections: tuple[int, int], depth: int) -> dict[str, Shape]:
    """keithito's ``cbhg``: a bank of ``bank`` convolutions of 128 channels, two projections (kernel 3), a dense to
    half the depth when the residual's width differs, four highway layers and a bidirectional GRU."""
    out = {}
    for k in range(1, bank + 1):
        out.update(conv_bn_shapes(f"{scope}/conv_bank/conv1d_{k}", k, cin, 128))
    out.update(conv_bn_shapes(f"{scope}/proj_1", 3, bank * 128, projections[0]))
    out.update(conv_bn_shapes(f"{scope}/proj_2", 3, projections[0], projections[1]))
    half = depth // 2
    if projections[1] != half:
        out.update(dense_shapes(f"{scope}/dense", projections[1], half))
    for n in range(1, 5):
        out.update(dense_shapes(f"{scope}/highway_{n}/H", half, half))
        out.update(dense_shapes(f"{scope}/highway_{n}/T", half, half))
    for d in ("fw", "bw"):
        out.update(_gru(f"{scope}/bidirectional_rnn/{d}/gru_cell", half, half))
    return out


def tf1_variable_shapes(hp: Tacotron1HParams, layout: str) -> dict[str, Shape]:
    """``{name relative to model/inference/: shape}`` of every trainable and batch-norm variable of a layout.

    Args:
        hp: the model's hparams (:func:`~speechblocks.tacotron1_hparams.resolve_tacotron1_hparams`).
        layout: one of :data:`LAYOUTS`. ``"mimic2"`` needs ``hp.attention == "location_sensitive"``, the keithito
            layouts ``"bahdanau"``.
    """
    scopes = attention_cell_scopes(layout)
    located = layout == "mimic2"
    if located != (hp.attention == "location_sensitive"):
        raise ValueError(f"tacotron1 layout {layout!r} has {'location-sensitive' if located else 'Bahdanau'} "
                         f"attention; the hparams say attention={hp.attention!r}.")
    pre, mem, att, dec = hp.prenet_depths, hp.memory_size, hp.attention_depth, hp.decoder_depth
    out: dict[str, Shape] = {"embedding": (hp.n_symbols, hp.embed_depth)}
    out.update(_prenet("prenet", hp.embed_depth, pre))
    out.update(_cbhg("encoder_cbhg", pre[-1], ENCODER_BANK, (128, pre[-1]), hp.encoder_depth))
    out["memory_layer/kernel"] = (mem, att)
    inside = layout != "keithito-20180906"
    out.update(_prenet(scopes["prenet"], hp.num_mels + (mem if inside else 0), pre))
    out.update(_gru(scopes["gru"], pre[-1] + (0 if inside else mem), att))
    out[f"{scopes['attention']}/query_layer/kernel"] = (att, att)
    out[f"{scopes['attention']}/attention_v"] = (att,)
    if located:
        out[f"{scopes['attention']}/location_conv/kernel"] = (hp.location_kernel_size, 1, hp.location_filters)
        out[f"{scopes['attention']}/location_layer/kernel"] = (hp.location_filters, att)
    out.update(dense_shapes(f"{DECODER_CELL}/cell_0/output_projection_wrapper", att + mem, dec))
    for k in (1, 2):
        out.update(_gru(f"{DECODER_CELL}/cell_{k}/gru_cell", dec, dec))
    out.update(dense_shapes("decoder/output_projection_wrapper", dec, hp.num_mels * hp.outputs_per_step))
    out.update(_cbhg("post_cbhg", hp.num_mels, POSTNET_BANK, (256, hp.num_mels), hp.postnet_depth))
    out.update(dense_shapes("dense", hp.postnet_depth, hp.num_freq))
    return out


# TF < 1.2 spellings (contrib rnn/python/tools/checkpoint_convert.py's _RNN_NAME_REPLACEMENTS for these cells)
_LEGACY = re.compile(r"(?P<scope>(?:^|/)(?:gru_cell/gates|gru_cell/candidate|output_projection_wrapper))/"
                     r"(?P<name>weights|biases)$")


def canonical_names(shapes: Mapping[str, Shape]) -> tuple[dict[str, Shape], dict[str, str]]:
    """``(shapes, renamed)``: the names with TF < 1.2's ``weights``/``biases`` of GRU cells and output projections
    spelled ``kernel``/``bias``, and ``{new name: old name}`` of those renamed.

    Raises:
        Tacotron1ShapesError: a variable present under both spellings.
    """
    out, renamed = {}, {}
    for name, shape in shapes.items():
        m = _LEGACY.search(name)
        new = name[:m.start("name")] + ("kernel" if m.group("name") == "weights" else "bias") if m else name
        if new in out:
            first = renamed.get(new, new)
            raise Tacotron1ShapesError(f"variable {new!r} is present under both TF1 spellings ({first!r} and "
                                       f"{name!r})", [f"duplicate variable {new!r}"])
        out[new] = tuple(int(d) for d in shape)
        if m:
            renamed[new] = name
    return out, renamed


class Tacotron1ShapesError(InputError):
    """A Tacotron-1 checkpoint's variables do not form a model of any layout (missing, mis-shaped or unexpected
    variables); the first sentence names the first one, :attr:`problems` lists them all."""

    def __init__(self, message: str, problems: list[str]):
        super().__init__(message)
        self.problems = list(problems)


class ModelFamilyError(InputError):
    """A preset of one family (Tacotron-1 or Tacotron-2) given for a checkpoint of the other."""


_SLOT = re.compile(r"/(Adam|Adam_\d+|ExponentialMovingAverage)$")


def _relative(shapes: Mapping[str, Shape], scope: str) -> dict[str, Shape]:
    prefix = scope + "/"
    return {n[len(prefix):]: s for n, s in shapes.items() if n.startswith(prefix) and not _SLOT.search(n)}


def _layout(names) -> str | None:
    found = [layout for layout in LAYOUTS if any(n.startswith(attention_cell_scopes(layout)["attention"] + "/")
                                                 for n in names)]
    return found[0] if len(found) == 1 else None


class _Reader:
    def __init__(self, shapes: dict[str, Shape]):
        self.shapes, self.problems = shapes, []

    def get(self, name: str, rank: int) -> Shape | None:
        s = self.shapes.get(name)
        if s is None:
            self.problems.append(f"missing variable {name!r}")
        elif len(s) != rank:
            self.problems.append(f"variable {name!r} has shape {list(s)}, expected rank {rank}")
            return None
        return s


def _read_sizes(s: _Reader, layout: str) -> dict:
    """The hparams the shapes of a layout determine."""
    scopes = attention_cell_scopes(layout)
    hp: dict = {}
    emb = s.get("embedding", 2)
    if emb:
        hp["n_symbols"], hp["embed_depth"] = emb
    sizes, i = [], 1
    while f"prenet/dense_{i}/kernel" in s.shapes:
        k = s.get(f"prenet/dense_{i}/kernel", 2)
        sizes.append(k[1] if k else 0)
        i += 1
    if not sizes:
        s.problems.append("missing variable 'prenet/dense_1/kernel'")
    hp["prenet_depths"] = sizes or [1]
    enc = s.get("encoder_cbhg/bidirectional_rnn/fw/gru_cell/gates/kernel", 2)
    if enc:
        hp["encoder_depth"] = enc[1]  # two GRUs of encoder_depth // 2: gates have 2 * (encoder_depth // 2) columns
    mem = s.get("memory_layer/kernel", 2)
    if mem:
        hp["attention_depth"] = mem[1]
    first = s.get(f"{scopes['prenet']}/dense_1/kernel", 2)
    if first:
        hp["num_mels"] = first[0] - (mem[0] if mem and layout != "keithito-20180906" else 0)
    proj = s.get(f"{DECODER_CELL}/cell_0/output_projection_wrapper/kernel", 2)
    if proj:
        hp["decoder_depth"] = proj[1]
    out = s.get("decoder/output_projection_wrapper/kernel", 2)
    if out and hp.get("num_mels", 0) > 0:
        r, rest = divmod(out[1], hp["num_mels"])
        if rest or not r:
            s.problems.append(f"variable 'decoder/output_projection_wrapper/kernel' has {out[1]} columns, not a "
                              f"multiple of num_mels={hp['num_mels']}")
        hp["outputs_per_step"] = max(r, 1)
    post = s.get("post_cbhg/bidirectional_rnn/fw/gru_cell/gates/kernel", 2)
    if post:
        hp["postnet_depth"] = post[1]
    lin = s.get("dense/kernel", 2)
    if lin:
        hp["num_freq"] = lin[1]
    if layout == "mimic2":
        loc = s.get(f"{scopes['attention']}/location_conv/kernel", 3)
        if loc:
            hp["location_kernel_size"], hp["location_filters"] = loc[0], loc[2]
    return hp


def _fail(source: str, problems: list[str]):
    more = f" (and {len(problems) - 1} more problem(s); --debug lists them)" if len(problems) > 1 else ""
    raise Tacotron1ShapesError(f"{source} is not a Tacotron-1 model of a known layout: {problems[0]}{more}", problems)


def infer_layout_and_hparams(shapes: Mapping[str, Shape], source: str = "the checkpoint"):
    """Which model family and layout a checkpoint's variables are, and the hparams their shapes determine.

    Args:
        shapes: ``{full checkpoint name: shape}`` (optimizer slots, EMA shadows and names outside the model's
            prefix are ignored). TF < 1.2 spellings (``weights``/``biases``) are accepted (:func:`canonical_names`).
        source: how messages name the checkpoint.

    Returns:
        ``("tacotron1", layout, Tacotron1HParams)`` for a keithito/mimic2 model under ``model/inference/``
        (``layout`` one of :data:`LAYOUTS`; the preset's values for what shapes cannot tell), or
        ``("tacotron2", None, dict)`` for a Rayhane/RTVC model under ``Tacotron_model/inference/`` (the dict of
        :func:`speechblocks.tacotron2_schema.infer_hparams`).

    Raises:
        Tacotron1ShapesError (an ``InputError``): neither family's prefix, an attention cell of no known layout, or
            variables that do not form the model (one line naming the first problem; ``.problems`` lists them).
    """
    if any(n.startswith(TACOTRON2_SCOPE + "/") for n in shapes):
        from .tacotron2_schema import infer_hparams

        return "tacotron2", None, infer_hparams(_relative(shapes, TACOTRON2_SCOPE))
    rel, _ = canonical_names(_relative(shapes, MODEL_SCOPE))
    if not rel:
        raise Tacotron1ShapesError(f"{source} holds no variable under {MODEL_SCOPE}/ (Tacotron-1) or "
                                   f"{TACOTRON2_SCOPE}/ (Tacotron-2)", ["no model variables"])
    layout = _layout(rel)
    if layout is None:
        scopes = ", ".join(attention_cell_scopes(x)["attention"][len(CONCAT) + 1:] for x in LAYOUTS)
        _fail(source, [f"no attention cell of a known layout under {MODEL_SCOPE}/{CONCAT}/ (looked for {scopes})"])
    reader = _Reader(rel)
    sizes = _read_sizes(reader, layout)
    if reader.problems:
        _fail(source, reader.problems)
    variant = "mimic2" if layout == "mimic2" else "keithito"
    if variant == "mimic2":
        sizes["embedding_dim"] = sizes.pop("embed_depth")
    try:
        hp = resolve_tacotron1_hparams(variant, **sizes)
    except ValueError as e:
        _fail(source, [f"the shapes give impossible hparams: {e}"])
    problems = shape_problems(rel, tf1_variable_shapes(hp, layout), "the other variables")
    if problems:
        _fail(source, problems)
    return "tacotron1", layout, hp


def check_preset_family(preset: str, family: str, source: str = "the checkpoint") -> None:
    """Refuse a preset of the other family: a Tacotron-2 preset (``rtvc``, ``rayhane``) for a Tacotron-1
    checkpoint, or a Tacotron-1 preset (``keithito``, ``mimic2``) for a Tacotron-2 one.

    Raises:
        ModelFamilyError (an ``InputError``): one line naming the preset, the checkpoint's family and the presets
            that fit.
    """
    presets = {"tacotron1": TACOTRON1_PRESETS, "tacotron2": TACOTRON2_PRESETS}
    if preset in presets[family]:
        return
    names = {"tacotron1": "Tacotron-1", "tacotron2": "Tacotron-2"}
    origins = {"tacotron1": "keithito/tacotron, mimic2", "tacotron2": "Rayhane-mamah, RTVC"}
    other = "tacotron2" if family == "tacotron1" else "tacotron1"
    kind = f"a {names[other]} preset" if preset in presets[other] else "not a preset"
    raise ModelFamilyError(f"--hparams {preset!r} is {kind}, but {source} holds a {names[family]} model "
                           f"({origins[family]}): use one of {', '.join(sorted(presets[family]))}")


class Tacotron1Found:
    """The Tacotron-1 model a checkpoint holds: ``layout``, ``hparams`` (:class:`Tacotron1HParams`), ``shapes``
    (``{relative name: shape}``), ``renamed`` (``{new: old}`` TF < 1.2 names)."""

    def __init__(self, layout: str, hparams: Tacotron1HParams, shapes: dict, renamed: dict):
        self.layout, self.hparams, self.shapes, self.renamed = layout, hparams, shapes, renamed

    @property
    def variant(self) -> str:
        return self.hparams.variant

    def describe(self) -> str:
        """``family: Tacotron-1 (keithito/tacotron, layout 20180906)``."""
        origin = "MycroftAI/mimic2" if self.layout == "mimic2" else "keithito/tacotron"
        layout = self.layout.split("-", 1)[1] if self.layout.startswith("keithito-") else self.layout
        return f"family: Tacotron-1 ({origin}, layout {layout})"

    def parameters(self) -> int:
        n = 0
        for shape in self.shapes.values():
            size = 1
            for d in shape:
                size *= d
            n += size
        return n


def find_tacotron1(shapes: Mapping[str, Shape], source: str = "the checkpoint") -> Tacotron1Found | None:
    """The Tacotron-1 model of a checkpoint (``None`` when no variable sits under ``model/inference/``).

    Raises:
        Tacotron1ShapesError: variables under ``model/inference/`` that form no Tacotron-1 model.
    """
    if not any(n.startswith(MODEL_SCOPE + "/") for n in shapes):
        return None
    _, layout, hp = infer_layout_and_hparams({n: s for n, s in shapes.items()
                                              if not n.startswith(TACOTRON2_SCOPE + "/")}, source)
    rel, renamed = canonical_names(_relative(shapes, MODEL_SCOPE))
    return Tacotron1Found(layout, hp, rel, renamed)
