"""TF1 names of the Tacotron-2 blocks' parts, as the TF1 graph spells them (both twins use these).

A leaf block (conv block, cell, dense) binds its own framework variables to names relative to its scope
(``_tf1_variables()``); a composite block's names are its parts' names under the parts' scopes. How those
scopes are spelled -- the seed's postnet indices, ``multi_rnn_cell/cell_{k}``, ``bidirectional_rnn/{fw,bw}``
-- does not depend on the framework and is written here once. The functions that collect variables take
the parts (anything with ``_tf1_variables()`` and, where said, ``tf1_scope``) and return
``{relative TF1 name: variable}`` in the TF1 graph's order. Imports no framework.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["SEED_LAST_INDEX", "nest_tf1_variables", "conv_layer_scope", "postnet_scope_indices",
           "encoder_lstm_scope", "decoder_lstm_scope", "cbhg_highway_scope", "cbhg_gru_scope", "CBHG_NAMINGS",
           "check_cbhg_naming", "cbhg_projection_scopes",
           "scoped_tf1_variables", "encoder_rnn_tf1_variables", "decoder_rnn_tf1_variables", "cbhg_tf1_variables"]

#: the index the seed hard-codes in the last postnet layer's scope, ``conv_layer_5_<scope>``
SEED_LAST_INDEX = 5


def nest_tf1_variables(parts: Iterable[tuple[str, Mapping]]) -> dict:
    """``{f"{scope}/{name}": variable}`` over ``(scope, {name: variable})`` pairs, in order."""
    return {f"{scope}/{name}": v for scope, variables in parts for name, v in variables.items()}


# -- scopes ---------------------------------------------------------------------------------------------
def conv_layer_scope(index: int, scope: str) -> str:
    """Layer ``index`` of a conv stack (``EncoderConvolutions``, ``Postnet``) under ``scope``."""
    return f"conv_layer_{index}_{scope}"


def postnet_scope_indices(num_layers: int, last_layer_scope_index: int | None, label: str = "Postnet", *,
                          integral_floats: bool = False) -> list[int]:
    """TF1 scope indices ``conv_layer_{i}_<scope>`` of the postnet layers, first to last.

    The seed names layers ``1 .. num_layers - 1`` and then hard-codes ``5`` for the last layer. With
    ``num_layers > 5`` two layers would share ``conv_layer_5`` (TF1 refuses to build that graph), so a
    corrected index must be asked for explicitly.

    Args:
        num_layers: the postnet's number of layers.
        last_layer_scope_index: ``None`` (the seed's 5) or an integer >= ``num_layers``.
        label: the block's name in the messages.
        integral_floats: also accept an integral non-``int`` number (``6.0``) as the index (the Keras layer
            does); by default only an ``int``.

    Raises:
        ValueError: an index that is not an integer >= 1, or one that collides with another layer's.
    """
    last = SEED_LAST_INDEX if last_layer_scope_index is None else last_layer_scope_index
    if integral_floats:
        bad = isinstance(last, bool) or int(last) != last or int(last) < 1
    else:
        bad = isinstance(last, bool) or not isinstance(last, int) or last < 1
    if bad:
        raise ValueError(f"{label}: `last_layer_scope_index` must be an integer >= 1 or None; got "
                         f"{last_layer_scope_index!r}.")
    last = int(last)
    if last < num_layers:
        if last_layer_scope_index is None:
            raise ValueError(
                f"{label}: num_layers={num_layers} > 5 cannot be named as the TF1 seed does: its last layer is "
                f"hard-coded as 'conv_layer_5_<scope>', which layer 5 already uses (TF1 refuses to build that "
                f"graph). Pass last_layer_scope_index={num_layers} (or any index >= num_layers) to name the last "
                f"layer 'conv_layer_{num_layers}_<scope>'.")
        raise ValueError(f"{label}: `last_layer_scope_index`={last} collides with the scope of layer {last}; it "
                         f"must be >= num_layers={num_layers}.")
    return list(range(1, num_layers)) + [last]


def encoder_lstm_scope(direction: str) -> str:
    """The ``"fw"`` or ``"bw"`` cell of ``EncoderRNN``."""
    return f"bidirectional_rnn/{direction}/encoder_{direction}_LSTM"


def decoder_lstm_scope(k: int) -> str:
    """Layer ``k`` (from 0) of ``DecoderRNN``'s ``MultiRNNCell``."""
    return f"multi_rnn_cell/cell_{k}/decoder_LSTM_{k + 1}"


#: the CBHG's TF1 naming schemes: Tacotron-2 (Rayhane/RTVC ``modules.py``) and keithito/tacotron's ``modules.py``
#: (mimic2 too): ``proj_{1,2}``, ``highway_{n}`` and the GRUs' default ``gru_cell`` scope
CBHG_NAMINGS = ("tacotron2", "keithito")


def check_cbhg_naming(naming: str, where: str = "CBHG") -> str:
    """``naming`` if it is one of :data:`CBHG_NAMINGS`, else ``ValueError`` naming ``tf1_naming``."""
    if naming not in CBHG_NAMINGS:
        raise ValueError(f"{where}: `tf1_naming` must be one of {list(CBHG_NAMINGS)}; got {naming!r}.")
    return naming


def cbhg_projection_scopes(naming: str = "tacotron2") -> tuple[str, str]:
    """The two projection convolutions' scopes: ``proj1``/``proj2`` (Tacotron-2) or ``proj_1``/``proj_2``."""
    return ("proj_1", "proj_2") if naming == "keithito" else ("proj1", "proj2")


def cbhg_highway_scope(scope: str, n: int, naming: str = "tacotron2") -> str:
    """Highway layer ``n`` (from 1) of the CBHG of TF1 scope ``scope``."""
    return f"highway_{n}" if naming == "keithito" else f"{scope}_highwaynet_{n}"


def cbhg_gru_scope(scope: str, direction: str, naming: str = "tacotron2") -> str:
    """The ``"fw"`` or ``"bw"`` GRU of the CBHG of TF1 scope ``scope``."""
    if naming == "keithito":
        return f"bidirectional_rnn/{direction}/gru_cell"
    name = "forward" if direction == "fw" else "backward"
    return f"bidirectional_rnn/{direction}/{scope}_{name}_RNN"


# -- composite blocks -------------------------------------------------------------------------------------
def scoped_tf1_variables(blocks: Iterable) -> dict:
    """The variables of ``blocks``, each under its own ``tf1_scope`` (a conv stack's layers)."""
    return nest_tf1_variables((b.tf1_scope, b._tf1_variables()) for b in blocks)


def encoder_rnn_tf1_variables(fw_cell, bw_cell) -> dict:
    """``EncoderRNN``: both cells under ``bidirectional_rnn/{fw,bw}/encoder_{fw,bw}_LSTM``."""
    return nest_tf1_variables((encoder_lstm_scope(d), c._tf1_variables())
                              for d, c in (("fw", fw_cell), ("bw", bw_cell)))


def decoder_rnn_tf1_variables(cells: Sequence) -> dict:
    """``DecoderRNN``: cell ``k`` under ``multi_rnn_cell/cell_{k}/decoder_LSTM_{k + 1}``."""
    return nest_tf1_variables((decoder_lstm_scope(k), c._tf1_variables()) for k, c in enumerate(cells))


def cbhg_tf1_variables(conv_bank: Sequence, proj1, proj2, dense: Mapping | None, highwaynets: Sequence, fw_cell,
                       bw_cell) -> dict:
    """``CBHG``: ``conv_bank/conv1d_{k}``, ``dense`` (``{"kernel": v, "bias": v}``, or ``None`` when the CBHG has
    none), and the projections, the highway nets and both GRU cells under their own ``tf1_scope``."""
    parts = [(f"conv_bank/conv1d_{k}", conv._tf1_variables()) for k, conv in enumerate(conv_bank, start=1)]
    parts += [(proj1.tf1_scope, proj1._tf1_variables()), (proj2.tf1_scope, proj2._tf1_variables())]
    if dense is not None:
        parts.append(("dense", dense))
    parts += [(block.tf1_scope, block._tf1_variables()) for block in (*highwaynets, fw_cell, bw_cell)]
    return nest_tf1_variables(parts)
