"""The texts of the input-check errors of ``tf_layers._validation`` and ``torch_layers._validation``.

Each framework reads dtypes and shapes its own way and words them its own way (``float16`` and
``(2, 3)`` in Keras, ``torch.float16`` and ``[2, 3]`` in torch); the sentence around them is written once
here. Plain annotated string functions, so the TorchScript-compiled torch checks call them too. Imports no
framework.
"""
from __future__ import annotations

__all__ = ["not_floating_message", "wrong_rank_message", "rank_below_two_message", "NONFINITE_TF1",
           "NONFINITE_ATTENTION", "NONFINITE_TORCH_NATIVE", "NONFINITE_MASKED_LOSS", "NONFINITE_SENTENCES"]

# -- the class-docstring sentence on non-finite inputs, one per kind of block (checked by tests/test_nonfinite_*.py);
# no block checks its inputs for NaN/inf: a check would cost a device sync per call in torch, and users compare
# against TF1, which propagates them
#: Tacotron-2 blocks: NaN/inf positions of every output equal the TF1 graph's (parity case ``nonfinite_inputs``)
NONFINITE_TF1 = "Non-finite inputs: NaN and inf propagate exactly as in the TF1 graph (no check, no device sync)."
#: the blocks holding the attention's softmax: which entries of a softmax row that mixes a NaN energy with others
#: come out NaN is TensorFlow's kernel's choice (oneDNN on AVX-512 vs Eigen), so the row is defined
NONFINITE_ATTENTION = ("Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync); a "
                       "step whose attention energies hold a NaN gives alignments that are NaN at every position of "
                       "that example, on every CPU.")
#: the torch-native modules and their Keras twins: as the original PyTorch module
NONFINITE_TORCH_NATIVE = ("Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no "
                          "device sync).")
#: the masked losses: masking by selection
NONFINITE_MASKED_LOSS = ("Non-finite inputs: the padding is ignored by selection (NaN/inf there leave the value and "
                         "the gradients finite, where TF1 gives NaN); NaN/inf at valid positions propagate as in TF1.")
#: every sentence above
NONFINITE_SENTENCES = (NONFINITE_TF1, NONFINITE_ATTENTION, NONFINITE_TORCH_NATIVE, NONFINITE_MASKED_LOSS)


def _expected(shape_doc: str) -> str:
    if len(shape_doc) > 0:
        return " expected shape " + shape_doc
    return ""


def not_floating_message(block: str, name: str, shape_doc: str, dtype: str) -> str:
    """``x`` is not a floating tensor."""
    return (block + ": argument `" + name + "` must be a floating tensor," + _expected(shape_doc) + "; got dtype "
            + dtype + ".")


def wrong_rank_message(block: str, name: str, rank: int, shape_doc: str, shape: str) -> str:
    """``x`` does not have rank ``rank``."""
    return (block + ": argument `" + name + "` must have rank " + str(rank) + "," + _expected(shape_doc)
            + "; got shape " + shape + ".")


def rank_below_two_message(block: str, name: str, shape_doc: str, shape: str) -> str:
    """A ``(batch, [time,] features)`` argument of rank < 2."""
    return (block + ": argument `" + name + "` must have rank >= 2, expected shape " + shape_doc + "; got shape "
            + shape + ".")
