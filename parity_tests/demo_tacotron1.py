"""``make demo``'s Tacotron-1 section: a keithito/tacotron checkpoint made by the TF1 legacy reference, inspected,
migrated to Keras and to PyTorch, proven unchanged and speaking.

8. The legacy reference builds keithito's whole model at its default hparams (``tacotron-20180906`` layout) under
   ``model/inference/``, fills the variables (seeded) and saves a real TF1 checkpoint
   (:func:`parity_tests.legacy.builders_tacotron1.write_default_checkpoint`). :func:`start_background` does that
   and then runs step 11's TF1 graphs (memoised for step 11) in a background thread while the demo's Tacotron-2
   part keeps the main process busy: the legacy subprocess works on the other core.
9. ``speechblocks inspect`` names the family, the layout and the hparams the shapes give.
10. ``speechblocks migrate --to keras`` and ``--to torch`` write the whole model.
11. ``speechblocks parity --checkpoint``: TF1 graph vs Keras vs torch on the checkpoint's weights (teacher forced,
    free running, training mode with the loss).
12. ``speechblocks synthesize --wav`` with both migrated files: keithito's ARPAbet input, Griffin-Lim of the linear
    output, the original end-point trimming; the two mel outputs are compared (random weights: it babbles).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import time

import numpy as np

from .report import Row, compare, format_table

__all__ = ["tacotron1_section", "start_background"]

SENTENCE = "Turn left on {HH AW1 S T AH0 N} Street."
STEPS = 5  # decoder steps of the parity runs
SYNTH_STEPS = 40  # decoder steps of the demo's synthesis (200 frames at r = 5)


def _step(msg: str) -> None:
    print(f"\n== {msg} ==", flush=True)


@dataclasses.dataclass
class Background:
    """Step 8 and step 11's TF1 graphs, run by :func:`start_background`: ``checkpoint`` (the prefix) and
    ``legacy`` (done when the graphs are memoised) are futures; ``seconds`` the thread's time for each."""

    checkpoint: concurrent.futures.Future
    legacy: concurrent.futures.Future
    seconds: dict


def start_background(tmp: str) -> Background:
    """Starts step 8 (the checkpoint, in ``tmp``) and then step 11's legacy graphs in a daemon thread."""
    from .checkpoint_parity_tacotron1 import prefetch_tacotron1_legacy
    from .legacy.builders_tacotron1 import write_default_checkpoint

    bg = Background(concurrent.futures.Future(), concurrent.futures.Future(), {})

    def work():
        for future, name, fn in (
                (bg.checkpoint, "checkpoint", lambda: write_default_checkpoint(os.path.join(tmp, "keithito"))),
                (bg.legacy, "legacy", lambda: prefetch_tacotron1_legacy(bg.checkpoint.result(), steps=STEPS,
                                                                        batch=1))):
            t = time.perf_counter()
            try:
                future.set_result(fn())
            except BaseException as e:  # noqa: BLE001 -- handed to the waiting main thread
                future.set_exception(e)
                if not bg.legacy.done():
                    bg.legacy.set_exception(e)
                return
            bg.seconds[name] = time.perf_counter() - t

    threading.Thread(target=work, name="tacotron1-legacy", daemon=True).start()
    return bg


def tacotron1_section(tmp: str, out_dir: str, background: Background | None = None) -> tuple[int, list[Row]]:
    """Runs steps 8-12 in ``tmp`` (files) and ``out_dir`` (the wav, mel and picture); returns ``(exit status of
    the first failing command or 0, parity rows)``. ``background``: what :func:`start_background` started
    (``None``: started here)."""
    from speechblocks.cli import main as cli_main

    from .checkpoint_parity_tacotron1 import run_tacotron1_checkpoint_parity

    t0 = time.perf_counter()
    _step("8. legacy TF1 checkpoint of keithito/tacotron (default hparams, layout 20180906)")
    background = background or start_background(tmp)
    ckpt = background.checkpoint.result()
    size = sum(os.path.getsize(os.path.join(os.path.dirname(ckpt), f)) for f in os.listdir(os.path.dirname(ckpt))
               if f.startswith("model.ckpt"))
    print(f"{ckpt} ({size / 2**20:.0f} MiB on disk) in {background.seconds['checkpoint']:.0f} s (in the "
          f"background; waited {time.perf_counter() - t0:.0f} s for it)")
    _step(f"9. speechblocks inspect {os.path.basename(ckpt)}")
    rc = cli_main(["inspect", ckpt])
    files = {"keras": os.path.join(tmp, "tacotron1.weights.h5"), "torch": os.path.join(tmp, "tacotron1.pt")}
    for to, out in files.items():
        if rc:
            return rc, []
        _step(f"10. speechblocks migrate {os.path.basename(ckpt)} --to {to} {os.path.basename(out)}")
        rc = cli_main(["migrate", ckpt, "--to", to, out])
    if rc:
        return rc, []
    _step(f"11. speechblocks parity --checkpoint {os.path.basename(ckpt)} --steps {STEPS}")
    t = time.perf_counter()
    background.legacy.result()  # the TF1 graphs, run in the background: memoised for the call below
    waited = time.perf_counter() - t
    rows = run_tacotron1_checkpoint_parity(ckpt, steps=STEPS, batch=1)
    print(f"(TF1 graphs run in the background in {background.seconds['legacy']:.0f} s; waited {waited:.0f} s)")
    print(format_table(rows))
    mels = {}
    for framework, source in files.items():
        mels[framework] = os.path.join(out_dir, f"tacotron1_{framework}.npy")
        argv = ["synthesize", source, "--text", SENTENCE, "--max-iters", str(SYNTH_STEPS), "--out", mels[framework]]
        if framework == "torch":
            argv += ["--wav", "--plot", os.path.join(out_dir, "tacotron1_alignment.png")]
        _step("12. speechblocks " + " ".join(os.path.basename(a) if os.sep in a else a for a in argv))
        rc = cli_main(argv)
        if rc:
            return rc, rows
    rows.append(compare("Tacotron1 synthesize", "Keras<->torch", f"mel_outputs (CLI, {SYNTH_STEPS} steps)",
                        np.load(mels["keras"]), np.load(mels["torch"]), 1e-4))
    print(format_table(rows[-1:]))
    print(f"(Tacotron-1 section: {time.perf_counter() - t0:.0f} s)")
    return 0, rows
