"""What a decoding plan is, in both frameworks (numpy-free, framework-free).

Each framework decides in **one** function which loop runs a Tacotron-2 or Tacotron-1 decoder call (``tf_layers``:
``tf_layers.decoding_plan.plan_decoding``, ``torch_layers``: ``torch_layers.decoding_plan.plan_decoding``) and returns
a :class:`DecodingPlan`: the loop, why that loop, and the options the loop honours (``progress``, ``stop_each``),
passed explicitly from the call to the loop instead of through hidden state. ``str(plan)`` is one line a person
reads: ``print(plan_decoding(model.decoder, memory))`` tells which loop a call would run and why. When the native
library was wanted and is unavailable, the ``speechblocks.native`` logger warns once with the reason, and
``speechblocks doctor`` reports the library's state.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

__all__ = ["DecodingPlan", "LOOPS"]

#: the loops a plan can choose, by name
LOOPS = {
    "native-step": "the native C decoder step at batch 1 (speechblocks/native/decoder_step.c)",
    "native-batch": "the native C decoder step for a batch (speechblocks/native/decoder_batch.c)",
    "native-tacotron1": "the native C Tacotron-1 decoder loop, every step in one call "
                        "(speechblocks/native/tacotron1_step.c)",
    "graph": "the framework's own free-running loop (TensorFlow: a tf.while_loop; torch: the TorchScript loop)",
    "python": "the framework's loop run step by step from Python (torch: progress reports, training, autograd)",
    "teacher-forced": "the teacher-forced loop over the target frames (training, GTA)",
}


@dataclass(frozen=True)
class DecodingPlan:
    """Which loop runs one decoder call and why.

    Attributes:
        loop: one of :data:`LOOPS`.
        reason: why this loop and not a faster one (e.g. ``"the native library is off: SPEECHBLOCKS_NATIVE=0"``);
            empty when the fastest loop for the call was taken.
        progress: ``progress(step, largest stop probability)`` called after every free-running step, or ``None``.
        stop_each: each batch entry leaves the loop at its own stop (``synthesize_batch``) instead of the
            original rule (the whole batch at one step).
    """
    loop: str
    reason: str = ""
    progress: Optional[Callable[[int, float], object]] = None
    stop_each: bool = False

    def __post_init__(self):
        if self.loop not in LOOPS:
            raise ValueError(f"DecodingPlan: `loop` must be one of {sorted(LOOPS)}; got {self.loop!r}.")

    @property
    def native(self) -> bool:
        """Whether the native C step runs."""
        return self.loop.startswith("native")

    def __str__(self) -> str:
        line = f"decoder loop: {self.loop}"
        return f"{line} ({self.reason})" if self.reason else line
