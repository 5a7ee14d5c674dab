"""The framework-free part of ``GaussianEmbedding`` (Keras and torch twins).

Constants of the TalkNet upsampling, the constructor checks and the texts of the input errors, written once.
The message builders are annotated string functions, so the TorchScript-compiled torch module calls them
too. Imports no framework.
"""
from __future__ import annotations

import math

__all__ = ["EPS", "LOG_SQRT_2PI", "BLOCK", "check_gaussian_embedding_arguments", "text_shape_doc",
           "outside_vocabulary_message", "interleave_message"]

#: added to every standard deviation and to each frame's weight sum (TalkNet's 1e-6)
EPS = 1e-6
#: ``log(sqrt(2 pi))``, the normal log-density's constant
LOG_SQRT_2PI = math.log(math.sqrt(2.0 * math.pi))
BLOCK = "GaussianEmbedding"


def check_gaussian_embedding_arguments(num_labels, d_emb, pad, sigma_c) -> None:
    """``num_labels`` and ``d_emb`` >= 1, ``pad`` a token id in ``[0, num_labels)``, ``sigma_c`` > 0."""
    if int(num_labels) < 1 or int(d_emb) < 1:
        raise ValueError(f"{BLOCK}: `num_labels` and `d_emb` must be >= 1; got {num_labels}, {d_emb}.")
    if not 0 <= int(pad) < int(num_labels):
        raise ValueError(f"{BLOCK}: `pad` must be a token id in [0, {num_labels}); got {pad}.")
    if not float(sigma_c) > 0.0:
        raise ValueError(f"{BLOCK}: `sigma_c` must be > 0; got {sigma_c}.")


def text_shape_doc(odd: bool) -> str:
    """The shape of ``text`` in messages: blanks interleaved (``odd``) or any length."""
    return "(batch, 2n+1)" if odd else "(batch, length)"


def outside_vocabulary_message(num_labels: int) -> str:
    """A token id outside ``[0, num_labels)`` (eager checks append ``": min ..., max ..."``)."""
    # a literal, not BLOCK: TorchScript compiles this function and reads no global strings
    return "GaussianEmbedding: argument `text` holds token ids outside the vocabulary [0, " + str(num_labels) + ")"


def interleave_message() -> str:
    """``text`` of even length where blanks must be interleaved (eager checks append more)."""
    return "GaussianEmbedding: argument `text` must interleave blanks, expected shape (batch, 2n+1)"
