"""The framework-free part of ``ContrastiveLoss`` (Keras and torch twins): its options, their checks and the
texts of the errors both twins raise. The message builders are annotated string functions, so the
TorchScript-compiled torch loss calls them too. Imports no framework.
"""
from __future__ import annotations

__all__ = ["REDUCTIONS", "check_contrastive_arguments", "sampling_description", "too_few_candidates_message",
           "indices_range_message", "batch_mismatch_message", "steps_mismatch_message"]

#: the cross-entropy reductions
REDUCTIONS = ("sum", "mean", "none")


def check_contrastive_arguments(in_dim, proj_dim, combine_time_steps, num_negatives, codebook_size, num_groups,
                                reduce, logit_temp, quantized_targets, group_loss, sample_from_codebook) -> None:
    """Sizes >= 1, a known ``reduce``, ``logit_temp`` > 0, codebook options only with quantized targets,
    ``proj_dim`` divisible by ``num_groups`` when quantized (``ValueError`` naming the argument)."""
    for name, value in (("in_dim", in_dim), ("proj_dim", proj_dim), ("combine_time_steps", combine_time_steps),
                        ("num_negatives", num_negatives), ("codebook_size", codebook_size),
                        ("num_groups", num_groups)):
        if int(value) < 1:
            raise ValueError(f"ContrastiveLoss: `{name}` must be >= 1; got {value}.")
    if reduce not in REDUCTIONS:
        raise ValueError(f"ContrastiveLoss: `reduce` must be one of {REDUCTIONS}; got {reduce!r}.")
    if not logit_temp > 0:
        raise ValueError(f"ContrastiveLoss: `logit_temp` must be > 0; got {logit_temp}.")
    if (group_loss or sample_from_codebook) and not quantized_targets:
        raise ValueError("ContrastiveLoss: `group_loss` and `sample_from_codebook` need `quantized_targets=True` "
                         "(they use the quantizer's codebook).")
    if quantized_targets and proj_dim % num_groups:
        raise ValueError(f"ContrastiveLoss: `proj_dim` ({proj_dim}) must be divisible by `num_groups` ({num_groups}).")


# -- messages (TorchScript-compatible: annotated, str concatenation) ----------------------------------------
def sampling_description(same_utterance: bool, from_all_steps: bool) -> str:
    """Where the distractors come from, as the messages name it."""
    kind = "same-utterance" if same_utterance else "batch-wide"
    return kind + " sampling from " + ("all steps" if from_all_steps else "masked steps")


def too_few_candidates_message(num_negatives: int, high: int, where: str) -> str:
    """More distractors asked for than there are candidates (sampling is without replacement)."""
    return ("ContrastiveLoss: num_negatives=" + str(num_negatives) + " exceeds the " + str(high) + " candidate steps "
            "available to " + where + " (sampling is without replacement); lower `num_negatives`, mask more steps or "
            "set `sample_from_non_masked=True`.")


def indices_range_message(high: int, where: str) -> str:
    """Given ``negative_indices`` outside ``[0, high)``."""
    return "ContrastiveLoss: argument `negative_indices` must lie in [0, " + str(high) + ") for " + where + "."


def batch_mismatch_message(decoder_batch: int, spectrogram_batch: int) -> str:
    return ("ContrastiveLoss: argument `decoder_outputs` has batch " + str(decoder_batch) + " but `spectrograms` has "
            + str(spectrogram_batch) + ".")


def steps_mismatch_message(decoder_steps: int, frames: int, combine_time_steps: int) -> str:
    return ("ContrastiveLoss: argument `decoder_outputs` has " + str(decoder_steps) + " steps for " + str(frames)
            + " spectrogram frames: ceil(time / time') must equal combine_time_steps=" + str(combine_time_steps) + ".")
