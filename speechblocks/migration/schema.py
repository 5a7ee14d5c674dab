"""The Tacotron-2 blocks a TF1 checkpoint can hold, and their constructor configs inferred from shapes.

Every block kind knows three things, all derived from the TF1 graph code's naming (docs/ARCHITECTURE.md, TF1 names):

* where it lives: its *block path* relative to ``Tacotron_model/inference/`` (``"decoder/decoder_LSTM"``)
  and its TF1 scope (the last path component, passed as ``tf1_scope=``);
* how to read its constructor config from the variable shapes (:meth:`BlockKind.infer`);
* which variables, with which shapes, that config implies (:meth:`BlockKind.expected`) -- the strict
  check compares this against the checkpoint, so a missing, mis-shaped or unknown variable is found
  before any framework is touched.

Hyper-parameters that leave no trace in the shapes (dropout and zoneout rates, activations, the CBHG's
max-pool size) take the seed's / Rayhane's defaults; they are listed in ``NOT_INFERABLE``.
Pure Python: importing this module imports no framework.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

from speechblocks.tacotron2_schema import conv_bn_shapes, dense_shapes, lstm_shapes

from ..errors import InputError

Shape = tuple[int, ...]

__all__ = ["BlockKind", "BLOCK_KINDS", "BLOCK_PATHS", "ConfigInferenceError", "MigrationError",
           "NoTacotronBlocksError", "NOT_INFERABLE", "kind_for_path"]


class ConfigInferenceError(InputError):
    """A block's config cannot be read from its variables; ``problems`` lists why."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class NoTacotronBlocksError(InputError):
    """The checkpoint holds no variable of any Tacotron-2 block this library knows."""


class MigrationError(InputError):
    """The migration cannot be done; ``problems`` lists every problem found (nothing was written)."""

    def __init__(self, checkpoint: str, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"cannot migrate {checkpoint!r} ({len(self.problems)} problem(s)); nothing was written:\n"
                         f"{lines}")


#: config keys whose value is a default (the shapes do not determine it), by class name
NOT_INFERABLE = {
    "EncoderConvolutions": ("drop_rate", "activation"),
    "EncoderRNN": ("zoneout",),
    "Prenet": ("drop_rate", "activation"),
    "DecoderRNN": ("zoneout",),
    "FrameProjection": ("activation",),
    "StopProjection": ("activation",),
    "Postnet": ("drop_rate", "activation"),
    "CBHG": ("pool_size",),
}


def _need(shapes: Mapping[str, Shape], key: str, rank: int) -> Shape:
    if key not in shapes:
        raise ConfigInferenceError([f"missing variable {key!r}, needed to infer the block's configuration"])
    shape = tuple(shapes[key])
    if len(shape) != rank:
        raise ConfigInferenceError([f"variable {key!r} has shape {list(shape)}, expected rank {rank}"])
    return shape


def _indices(shapes: Mapping[str, Shape], pattern: str) -> list[int]:
    rx = re.compile(pattern)
    return sorted({int(m.group(1)) for k in shapes for m in [rx.fullmatch(k)] if m})


def _contiguous(indices: list[int], what: str) -> int:
    if not indices:
        raise ConfigInferenceError([f"no {what} found"])
    if indices != list(range(1, len(indices) + 1)):
        raise ConfigInferenceError([f"{what} are numbered {indices}, expected 1..{len(indices)} without gaps"])
    return len(indices)


# -- the block kinds ------------------------------------------------------------------------------
def _infer_encoder_convolutions(s, scope):
    n = _contiguous(_indices(s, rf"conv_layer_(\d+)_{re.escape(scope)}/conv1d/kernel"), "convolution layers")
    k, cin, ch = _need(s, f"conv_layer_1_{scope}/conv1d/kernel", 3)
    return dict(kernel_size=k, channels=ch, num_layers=n, drop_rate=0.5, activation="relu"), cin


def _expect_encoder_convolutions(c, cin, scope):
    out = {}
    for i in range(c["num_layers"]):
        out.update(conv_bn_shapes(f"conv_layer_{i + 1}_{scope}", c["kernel_size"], cin if i == 0 else c["channels"],
                            c["channels"]))
    return out


def _infer_encoder_rnn(s, scope):
    kernel = _need(s, "bidirectional_rnn/fw/encoder_fw_LSTM/kernel", 2)
    if kernel[1] % 4:
        raise ConfigInferenceError([f"LSTM kernel has {kernel[1]} columns, not a multiple of 4 (i, j, f, o gates)"])
    size = kernel[1] // 4
    return dict(size=size, zoneout=0.1), kernel[0] - size


def _expect_encoder_rnn(c, cin, scope):
    out = {}
    for d in ("fw", "bw"):
        out.update(lstm_shapes(f"bidirectional_rnn/{d}/encoder_{d}_LSTM", cin, c["size"]))
    return out


def _infer_prenet(s, scope):
    n = _contiguous(_indices(s, r"dense_(\d+)/kernel"), "prenet dense layers")
    sizes = [_need(s, f"dense_{i + 1}/kernel", 2)[1] for i in range(n)]
    return dict(layers_sizes=sizes, drop_rate=0.5, activation="relu"), _need(s, "dense_1/kernel", 2)[0]


def _expect_prenet(c, cin, scope):
    out, prev = {}, cin
    for i, size in enumerate(c["layers_sizes"]):
        out.update(dense_shapes(f"dense_{i + 1}", prev, size))
        prev = size
    return out


def _infer_decoder_rnn(s, scope):
    cells = _indices(s, r"multi_rnn_cell/cell_(\d+)/decoder_LSTM_\d+/kernel")
    if not cells:
        raise ConfigInferenceError(["no decoder LSTM layers (multi_rnn_cell/cell_<k>/decoder_LSTM_<k+1>/kernel) found"])
    if cells != list(range(len(cells))):
        raise ConfigInferenceError([f"decoder LSTM cells are numbered {cells}, expected 0..{len(cells) - 1}"])
    kernel = _need(s, "multi_rnn_cell/cell_0/decoder_LSTM_1/kernel", 2)
    if kernel[1] % 4:
        raise ConfigInferenceError([f"LSTM kernel has {kernel[1]} columns, not a multiple of 4 (i, j, f, o gates)"])
    size = kernel[1] // 4
    return dict(layers=len(cells), size=size, zoneout=0.1), kernel[0] - size


def _expect_decoder_rnn(c, cin, scope):
    out = {}
    for i in range(c["layers"]):
        out.update(lstm_shapes(f"multi_rnn_cell/cell_{i}/decoder_LSTM_{i + 1}", cin if i == 0 else c["size"],
                               c["size"]))
    return out


def _infer_frame_projection(s, scope):
    cin, units = _need(s, f"projection_{scope}/kernel", 2)
    return dict(shape=units, activation=None), cin


def _infer_stop_projection(s, scope):
    cin, units = _need(s, f"projection_{scope}/kernel", 2)
    return dict(shape=units, activation="sigmoid"), cin


def _expect_projection(c, cin, scope):
    return dense_shapes(f"projection_{scope}", cin, c["shape"])


def _postnet_indices(n: int) -> list[int]:
    # the seed names the last layer conv_layer_5_<scope> whatever the number of layers
    return list(range(1, n)) + [5]


def _infer_postnet(s, scope):
    found = _indices(s, rf"conv_layer_(\d+)_{re.escape(scope)}/conv1d/kernel")
    if not found:
        raise ConfigInferenceError(["no postnet convolution layers found"])
    n = len(found)
    if n > 5 or sorted(set(_postnet_indices(n))) != found:
        raise ConfigInferenceError([f"postnet layers are numbered {found}; the TF1 postnet numbers n layers "
                                    "1..n-1 and 5 (n <= 5)"])
    k, cin, ch = _need(s, f"conv_layer_1_{scope}/conv1d/kernel", 3)
    return dict(kernel_size=k, channels=ch, num_layers=n, drop_rate=0.5, activation="tanh"), cin


def _expect_postnet(c, cin, scope):
    out = {}
    for j, i in enumerate(_postnet_indices(c["num_layers"])):
        out.update(conv_bn_shapes(f"conv_layer_{i}_{scope}", c["kernel_size"], cin if j == 0 else c["channels"],
                            c["channels"]))
    return out


def _infer_cbhg(s, scope):
    K = _contiguous(_indices(s, r"conv_bank/conv1d_(\d+)/conv1d/kernel"), "convolution-bank layers")
    _, cin, cc = _need(s, "conv_bank/conv1d_1/conv1d/kernel", 3)
    pk, _, p0 = _need(s, "proj1/conv1d/kernel", 3)
    p1 = _need(s, "proj2/conv1d/kernel", 3)[2]
    n_hw = _contiguous(_indices(s, rf"{re.escape(scope)}_highwaynet_(\d+)/H/kernel"), "highway layers")
    hu = _need(s, f"{scope}_highwaynet_1/H/kernel", 2)[1]
    gates = _need(s, f"bidirectional_rnn/fw/{scope}_forward_RNN/gates/kernel", 2)
    if gates[1] % 2:
        raise ConfigInferenceError([f"GRU gates kernel has {gates[1]} columns, not a multiple of 2 (r, u gates)"])
    config = dict(K=K, conv_channels=cc, pool_size=2, projections=[p0, p1], projection_kernel_size=pk,
                  n_highwaynet_layers=n_hw, highway_units=hu, rnn_units=gates[1] // 2)
    return config, cin


def _expect_cbhg(c, cin, scope):
    out = {}
    for k in range(1, c["K"] + 1):
        out.update(conv_bn_shapes(f"conv_bank/conv1d_{k}", k, cin, c["conv_channels"]))
    p0, p1 = c["projections"]
    pk = c["projection_kernel_size"]
    out.update(conv_bn_shapes("proj1", pk, c["K"] * c["conv_channels"], p0))
    out.update(conv_bn_shapes("proj2", pk, p0, p1))
    hu, ru = c["highway_units"], c["rnn_units"]
    if p1 != hu:  # the dimension-fix dense (docs/ARCHITECTURE.md, semantics)
        out.update(dense_shapes("dense", p1, hu))
    for n in range(1, c["n_highwaynet_layers"] + 1):
        out.update(dense_shapes(f"{scope}_highwaynet_{n}/H", hu, hu))
        out.update(dense_shapes(f"{scope}_highwaynet_{n}/T", hu, hu))
    for d, name in (("fw", "forward"), ("bw", "backward")):
        cell = f"bidirectional_rnn/{d}/{scope}_{name}_RNN"
        out.update(dense_shapes(f"{cell}/gates", hu + ru, 2 * ru))
        out.update(dense_shapes(f"{cell}/candidate", hu + ru, ru))
    return out


def _check_cbhg(c, cin, scope):
    if c["projections"][-1] != cin:
        return [f"the residual connection adds proj2's output ({c['projections'][-1]} channels) to the input "
                f"({cin} channels): they must be equal"]
    return []


@dataclasses.dataclass(frozen=True)
class BlockKind:
    """One Tacotron-2 block as it sits in a TF1 checkpoint.

    Args:
        path: block path relative to ``Tacotron_model/inference/`` (the key of ``load_migrated``).
        class_name: the ``tf_layers`` / ``torch_layers`` class.
        input_arg: name of the torch constructor's first argument (``input_size`` or ``in_channels``).
    """

    path: str
    class_name: str
    input_arg: str
    _infer: Callable
    _expected: Callable
    _check: Callable | None = None

    @property
    def scope(self) -> str:
        """The block's TF1 scope (``tf1_scope=``): the last component of its path."""
        return self.path.rsplit("/", 1)[-1]

    def infer(self, shapes: Mapping[str, Shape]) -> tuple[dict, int]:
        """``(constructor config, input feature size)`` from ``{relative TF1 name: shape}``.

        Raises:
            ConfigInferenceError: a variable the inference needs is absent or of the wrong rank.
        """
        config, input_size = self._infer(shapes, self.scope)
        config = dict(config, tf1_scope=self.scope)
        return config, int(input_size)

    def expected(self, config: Mapping, input_size: int) -> dict[str, Shape]:
        """``{relative TF1 name: shape}`` of every variable the block with this config holds."""
        return self._expected(config, input_size, self.scope)

    def config_problems(self, config: Mapping, input_size: int) -> list[str]:
        """Inconsistencies of an inferred config the shapes alone do not reveal."""
        return self._check(config, input_size, self.scope) if self._check else []


BLOCK_KINDS: tuple[BlockKind, ...] = (
    BlockKind("encoder_convolutions", "EncoderConvolutions", "in_channels", _infer_encoder_convolutions,
              _expect_encoder_convolutions),
    BlockKind("encoder_LSTM", "EncoderRNN", "input_size", _infer_encoder_rnn, _expect_encoder_rnn),
    BlockKind("decoder/decoder_prenet", "Prenet", "input_size", _infer_prenet, _expect_prenet),
    BlockKind("decoder/decoder_LSTM", "DecoderRNN", "input_size", _infer_decoder_rnn, _expect_decoder_rnn),
    BlockKind("decoder/linear_transform_projection", "FrameProjection", "input_size", _infer_frame_projection,
              _expect_projection),
    BlockKind("decoder/stop_token_projection", "StopProjection", "input_size", _infer_stop_projection,
              _expect_projection),
    BlockKind("postnet_convolutions", "Postnet", "in_channels", _infer_postnet, _expect_postnet),
    BlockKind("postnet_projection", "FrameProjection", "input_size", _infer_frame_projection, _expect_projection),
    BlockKind("CBHG_postnet", "CBHG", "input_size", _infer_cbhg, _expect_cbhg, _check_cbhg),
    BlockKind("cbhg_linear_specs_projection", "FrameProjection", "input_size", _infer_frame_projection,
              _expect_projection),
)

BLOCK_PATHS: tuple[str, ...] = tuple(k.path for k in BLOCK_KINDS)

#: class names a migrated file may name (anything else is refused when loading)
BLOCK_CLASSES = frozenset(k.class_name for k in BLOCK_KINDS)


def kind_for_path(path: str) -> BlockKind:
    for k in BLOCK_KINDS:
        if k.path == path:
            return k
    raise KeyError(path)
