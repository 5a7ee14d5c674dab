"""``make demo``'s Tacotron-1 section: a keithito/tacotron checkpoint made by the TF1 legacy reference, inspected,
migrated to Keras and to PyTorch, proven unchanged and speaking.

8. The legacy reference builds keithito's whole model at its default hparams (``tacotron-20180906`` layout) under
   ``model/inference/``, fills the variables (seeded) and saves a real TF1 checkpoint
   (:func:`parity_tests.legacy.builders_tacotron1.write_default_checkpoint`). :func:`start_background` does that
   and then runs step 11's TF1 graphs (memoised for step 11) in a background thread, on a TF1 subprocess of its
   own (:class:`OwnLegacyReference`), from the demo's start: beside the Tacotron-2 part's step 1 (whose legacy
   subprocess leaves the main process waiting) and on into its steps 2-4, on the other core.
9. ``speechblocks inspect`` names the family, the layout and the hparams the shapes give.
10. ``speechblocks migrate --to keras`` and ``--to torch`` write the whole model.
11. ``speechblocks parity --checkpoint``: TF1 graph vs Keras vs torch on the checkpoint's weights (teacher forced,
    free running, training mode with the loss).
12. ``speechblocks synthesize --wav`` with both migrated files: keithito's ARPAbet input, Griffin-Lim of the linear
    output, the original end-point trimming; the two mel outputs are compared (random weights: it babbles).

Steps 9-12 run in the main thread through ``speechblocks.cli.main`` (in process: TensorFlow and torch are already
imported). What the section adds to the demo's wall clock is the main thread's time from step 8 to the end of step
12, waits on the background included; the demo prints it (:func:`timing_lines`) with the background's wall and CPU
seconds. ``python -m parity_tests.demo --only tacotron1`` runs the section alone (the background then has nothing to
overlap: its wait is shown apart).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import time

import numpy as np

from .report import Row, compare, format_table

__all__ = ["tacotron1_section", "start_background", "timing_lines", "OwnLegacyReference"]

SENTENCE = "Turn left on {HH AW1 S T AH0 N} Street."
STEPS = 5  # decoder steps of the parity runs
SYNTH_STEPS = 20  # decoder steps of the demo's synthesis (100 frames at r = 5: 1.25 s before the end-point trim)


def _step(msg: str) -> None:
    print(f"\n== {msg} ==", flush=True)


def _process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process and of its reaped children (Linux ``/proc``; 0.0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime


class OwnLegacyReference:
    """A TF1 legacy subprocess of the section's own (``parity_tests.reference``'s server class): the background's
    graphs neither queue behind the Tacotron-2 part's legacy requests nor hold them up, and its CPU seconds are the
    section's alone. Called as :func:`parity_tests.reference.run_legacy` and filling the same memo, so that the
    later ``run_tacotron1_checkpoint_parity`` call finds its results."""

    def __init__(self):
        from .reference import _LegacyServer

        self.server = _LegacyServer()

    def __call__(self, specs: list, timeout: float = 1200.0) -> list:
        """:func:`parity_tests.reference.run_legacy` (the same steps) on this subprocess."""
        import json
        import tempfile

        from . import reference

        todo = {s.key(): s for s in specs if s.key() not in reference._MEMO}
        if todo:
            root = tempfile.mkdtemp(dir=reference._workdir())
            payload, arrays = [], {}
            for k, s in todo.items():
                payload.append({"id": k, "block": s.block, "config": s.config, "scope": s.scope,
                                "training": s.training, "seed": s.seed, "options": s.options,
                                "dynamic_shapes": s.dynamic_shapes, "input_names": sorted(s.inputs)})
                arrays.update({f"{k}::{name}": np.asarray(a) for name, a in s.inputs.items()})
            spec_path, inputs_path = os.path.join(root, "specs.json"), os.path.join(root, "inputs.npz")
            with open(spec_path, "w") as f:
                json.dump(payload, f, default=str)
            np.savez(inputs_path, **arrays)
            self.server.run(spec_path, inputs_path, root, timeout)
            for k, s in todo.items():
                with open(os.path.join(root, k, "meta.json")) as f:
                    meta = json.load(f)
                with np.load(os.path.join(root, k, "outputs.npz")) as z:
                    outputs = {name: z[name] for name in z.files}
                reference._MEMO[k] = reference.LegacyResult(s, meta["checkpoint"], meta["block_scope"], outputs)
        return [reference._MEMO[s.key()] for s in specs]

    def cpu_seconds(self) -> float:
        """CPU seconds of the subprocess so far (while it runs)."""
        proc = self.server.proc
        return 0.0 if proc is None or proc.poll() is not None else _process_cpu_seconds(proc.pid)

    def close(self) -> None:
        self.server.close()


@dataclasses.dataclass
class Background:
    """Step 8 and step 11's TF1 graphs, run by :func:`start_background`: ``checkpoint`` (the prefix) and
    ``legacy`` (done when the graphs are memoised) are futures; ``seconds`` the thread's wall time for each;
    ``started``/``finished`` its ``time.perf_counter()`` span; ``thread_cpu`` the thread's own CPU seconds and
    ``legacy_cpu`` those of its TF1 subprocess (both set when it finishes); ``section`` the main thread's times,
    set by :func:`tacotron1_section` (``main``: its whole time in the section, ``waited``: of it, waiting for
    these futures, ``cpu``: the main thread's CPU seconds in it)."""

    checkpoint: concurrent.futures.Future
    legacy: concurrent.futures.Future
    seconds: dict
    started: float
    finished: float | None = None
    thread_cpu: float = 0.0
    legacy_cpu: float = 0.0
    section: dict = dataclasses.field(default_factory=dict)


def start_background(tmp: str) -> Background:
    """Starts step 8 (the checkpoint, in ``tmp``) and then step 11's legacy graphs in a daemon thread, on a TF1
    subprocess of their own (:class:`OwnLegacyReference`; closed when they are done)."""
    from .checkpoint_parity_tacotron1 import prefetch_tacotron1_legacy
    from .legacy.builders_tacotron1 import write_default_checkpoint

    bg = Background(concurrent.futures.Future(), concurrent.futures.Future(), {}, time.perf_counter())

    def work():
        cpu0, legacy, error = time.thread_time(), OwnLegacyReference(), None
        try:
            t = time.perf_counter()
            ckpt = write_default_checkpoint(os.path.join(tmp, "keithito"), run_legacy=legacy)
            bg.seconds["checkpoint"] = time.perf_counter() - t
            bg.checkpoint.set_result(ckpt)  # steps 9 and 10 may go on while the graphs run
            t = time.perf_counter()
            prefetch_tacotron1_legacy(ckpt, steps=STEPS, batch=1, run_legacy=legacy)
            bg.seconds["legacy"] = time.perf_counter() - t
        except BaseException as e:  # noqa: BLE001 -- handed to the waiting main thread
            error = e
        finally:  # the figures first: the main thread reads them once `legacy` is done
            bg.legacy_cpu = legacy.cpu_seconds()
            legacy.close()
            bg.thread_cpu = time.thread_time() - cpu0
            bg.finished = time.perf_counter()
            for future in (bg.checkpoint, bg.legacy):
                if future.done():
                    continue
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(None)

    threading.Thread(target=work, name="tacotron1-legacy", daemon=True).start()
    return bg


def tacotron1_section(tmp: str, out_dir: str, background: Background | None = None) -> tuple[int, list[Row]]:
    """Runs steps 8-12 in ``tmp`` (files) and ``out_dir`` (the wav, mel and picture); returns ``(exit status of
    the first failing command or 0, parity rows)``. ``background``: what :func:`start_background` started
    (``None``: started here); its ``section`` gets the main thread's times (``main``, ``waited``, ``cpu``)."""
    t0, cpu0 = time.perf_counter(), time.thread_time()
    background = background or start_background(tmp)
    background.section.update(main=0.0, waited=0.0, cpu=0.0)
    try:
        return _section(tmp, out_dir, background)
    finally:
        background.section["main"] = time.perf_counter() - t0
        background.section["cpu"] = time.thread_time() - cpu0


def _wait(background: Background, future: concurrent.futures.Future):
    t = time.perf_counter()
    try:
        return future.result()
    finally:
        background.section["waited"] += time.perf_counter() - t


def _section(tmp: str, out_dir: str, background: Background) -> tuple[int, list[Row]]:
    from speechblocks.cli import main as cli_main

    from .checkpoint_parity_tacotron1 import run_tacotron1_checkpoint_parity

    _step("8. legacy TF1 checkpoint of keithito/tacotron (default hparams, layout 20180906)")
    t = time.perf_counter()
    ckpt = _wait(background, background.checkpoint)
    size = sum(os.path.getsize(os.path.join(os.path.dirname(ckpt), f)) for f in os.listdir(os.path.dirname(ckpt))
               if f.startswith("model.ckpt"))
    print(f"{ckpt} ({size / 2**20:.0f} MiB on disk) in {background.seconds['checkpoint']:.0f} s (in the "
          f"background, on a TF1 subprocess of its own; waited {time.perf_counter() - t:.0f} s for it)")
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
    _step(f"11. speechblocks parity --checkpoint {os.path.basename(ckpt)} --steps {STEPS} (one text: batch 1)")
    t = time.perf_counter()
    _wait(background, background.legacy)  # the TF1 graphs, run in the background: memoised for the call below
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
    return 0, rows


def timing_lines(background: Background, t_demo: float) -> list[str]:
    """The section's part of the demo's closing figures (``t_demo``: the demo's ``time.perf_counter()`` at its
    start): the main thread's time in it -- what it adds to the wall clock, the background's work overlapping the
    Tacotron-2 part on the otherwise idle second core -- and the background's wall and CPU seconds."""
    sec, bg = background.section, background
    span = (f"t = {bg.started - t_demo:.0f}-{bg.finished - t_demo:.0f} s" if bg.finished is not None
            else "still running")
    return [
        f"Tacotron-1 section, main thread (steps 8-12, waits included): {sec.get('main', 0.0):.1f} s wall, of it "
        f"{sec.get('waited', 0.0):.1f} s waiting for the background; {sec.get('cpu', 0.0):.1f} s CPU (the main "
        f"thread's)",
        f"Tacotron-1 background thread (step 8's checkpoint, step 11's TF1 graphs): {span}, "
        f"{sum(bg.seconds.values()):.1f} s wall (checkpoint {bg.seconds.get('checkpoint', 0.0):.1f} s, graphs "
        f"{bg.seconds.get('legacy', 0.0):.1f} s); CPU {bg.thread_cpu + bg.legacy_cpu:.1f} s (the thread "
        f"{bg.thread_cpu:.1f} s, its TF1 subprocess {bg.legacy_cpu:.1f} s)",
    ]
