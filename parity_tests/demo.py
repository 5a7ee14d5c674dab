"""``make demo``: a legacy TF1 Tacotron-2 checkpoint, migrated to Keras and to PyTorch, proven unchanged, speaking.

1. The TF1 legacy reference builds the whole Tacotron-2 of the TF1 Real-Time-Voice-Cloning synthesizer's default
   hparams (RTVC: r = 2, 256-d speaker embedding) under ``Tacotron_model/inference/``, fills the variables, runs
   one ``AdamOptimizer`` step (so the checkpoint carries Adam slots as a trained one does) and saves a real TF1
   checkpoint.
2. ``speechblocks inspect`` lists the model and the blocks it holds.
3. ``speechblocks migrate --to keras`` and ``--to torch`` write the whole model.
4. ``tf_layers.checkpoint.load_migrated`` / ``torch_layers.load_migrated`` rebuild the blocks; the TF1
   graph, the Keras blocks and the torch blocks run on the same inputs (block rows, docs/ARCHITECTURE.md, tolerances).
5. ``speechblocks parity --checkpoint``: the whole model on the checkpoint's weights, teacher-forced and free
   running, TF1 vs Keras vs torch (the whole-model rows).
6. A reference sentence recorded with Debian's ``flite`` is embedded with the real pretrained GE2E weights
   (``speechblocks embed``).
7. ``speechblocks synthesize`` from a sentence with the migrated torch and Keras files: torch with the voice of
   the recording (``--speaker-wav``) and a wav by Griffin-Lim (``--wav``), Keras with the embedding file; the two
   mel outputs are compared and the wav, the mel and the alignment picture are written to ``demo-output/``
   (random weights: no real alignment, the wav babbles).
8-12. The Tacotron-1 family (:mod:`parity_tests.demo_tacotron1`): a keithito/tacotron checkpoint made by the legacy
   reference, inspected, migrated to both frameworks, compared on its weights (TF1 vs Keras vs torch) and
   synthesized to a wav from the linear output. Its TF1 graphs run in a background thread from the demo's start.

At the end the demo prints its timing: total wall and CPU seconds (this process and its subprocesses), the load
average, the Tacotron-2 part's main-thread time, and the Tacotron-1 section's main-thread time (steps 8-12, waits on
its background included: what the section adds to the wall clock) with the background's wall and CPU seconds.
``--only tacotron2`` runs steps 1-7 alone (the baseline for that increment), ``--only tacotron1`` steps 8-12 alone.

The functions :func:`legacy_model_spec`, :func:`run_keras_block` and :func:`run_torch_block` are shared
with the migration tests and the migration benchmark.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

from .legacy.builders_model import make_inputs, model_configs
from .reference import LegacySpec
from .report import Row, compare, format_table

__all__ = ["legacy_model_spec", "run_keras_block", "run_torch_block", "parity_rows", "main"]

TOL = 1e-5  # float32, per block (the decoder runs a few steps only)


def legacy_model_spec(variant: str = "rayhane", batch: int = 2, time_steps: int = 7, seed: int = 0,
                      only: list[str] | None = None, **options) -> LegacySpec:
    """The legacy spec of a full-size model checkpoint with an Adam step (``options`` override)."""
    from .legacy.builders_model import shrink

    config = shrink(model_configs(variant), only)
    opts = {"adam_step": True}
    opts.update(options)
    return LegacySpec("Tacotron2Model", config, make_inputs(config, batch, time_steps, seed), seed=seed, options=opts)


def _masks(outputs: dict, path: str) -> list[np.ndarray]:
    masks, i = [], 0
    while f"mask/{path}/{i}" in outputs:
        masks.append(outputs[f"mask/{path}/{i}"])
        i += 1
    return masks


def run_keras_block(path: str, block, inputs: dict, legacy_outputs: dict) -> np.ndarray:
    """Runs a migrated Keras block in inference on the legacy spec's inputs for ``path`` (prenet:
    with the dropout masks the TF1 graph drew, as its dropout is always on)."""
    x = inputs[f"{path}/inputs"]
    lengths = inputs.get(f"{path}/input_lengths")
    name = type(block).__name__
    if name == "Prenet":
        y = block(x, training=False, dropout_masks=_masks(legacy_outputs, path))
    elif name in ("EncoderRNN", "CBHG"):
        y = block(x, input_lengths=lengths, training=False)
    elif name == "DecoderRNN":
        y = block(x, training=False)[0]  # the teacher-forced sequence form, from the zero state
    else:
        y = block(x, training=False)
    return np.asarray(y)


def run_torch_block(path: str, module, inputs: dict, legacy_outputs: dict) -> np.ndarray:
    """The torch twin of :func:`run_keras_block` (module in ``eval()``)."""
    import torch

    x = torch.from_numpy(np.ascontiguousarray(inputs[f"{path}/inputs"]))
    lengths = inputs.get(f"{path}/input_lengths")
    lengths = None if lengths is None else torch.from_numpy(np.asarray(lengths, np.int64))
    name = type(module).__name__
    with torch.no_grad():
        if name == "Prenet":
            y = module(x, dropout_masks=[torch.from_numpy(m) for m in _masks(legacy_outputs, path)])
        elif name in ("EncoderRNN", "CBHG"):
            y = module(x, lengths)
        elif name == "DecoderRNN":
            y = module(x)[0]
        else:
            y = module(x)
    return y.detach().cpu().numpy()


def parity_rows(legacy, keras_blocks: dict, torch_blocks: dict, tol: float = TOL) -> list[Row]:
    """TF1->Keras, TF1->torch and Keras<->torch rows for every migrated block."""
    rows = []
    inputs, outputs = legacy.spec.inputs, legacy.outputs
    for path in sorted(set(keras_blocks) | set(torch_blocks)):
        ref = outputs[f"{path}/outputs"]
        yk = run_keras_block(path, keras_blocks[path], inputs, outputs) if path in keras_blocks else None
        yt = run_torch_block(path, torch_blocks[path], inputs, outputs) if path in torch_blocks else None
        if yk is not None:
            rows.append(compare(path, "TF1->Keras", "outputs (migrated)", yk, ref, tol))
        if yt is not None:
            rows.append(compare(path, "TF1->torch", "outputs (migrated)", yt, ref, tol))
        if yk is not None and yt is not None:
            rows.append(compare(path, "Keras<->torch", "outputs (migrated)", yt, yk, tol))
    return rows


REFERENCE_TEXT = "The quick brown fox jumps over the lazy dog, and then it runs back home."


def _record_reference(path: str) -> str:
    """A reference recording: Debian's ``flite`` (16 kHz) speaking :data:`REFERENCE_TEXT`, else a synthetic voice
    (a glottal-pulse-like harmonic series with pitch and formant movement, and pauses)."""
    import shutil
    import subprocess

    from speechblocks.audio import save_wav

    if shutil.which("flite"):
        subprocess.run(["flite", "-voice", "slt", "-t", REFERENCE_TEXT, "-o", path], check=True)
        return f"{path}: flite -voice slt -t {REFERENCE_TEXT!r}"
    sr = 16000
    t = np.arange(int(3.0 * sr)) / sr
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    wav = sum(np.sin(k * phase) / k * (1 + np.cos(2 * np.pi * (k * f0) / 900)) for k in range(1, 30))
    wav *= (np.sin(2 * np.pi * 1.5 * t) > -0.3)  # syllable-like bursts with pauses
    save_wav(wav.astype(np.float32), path, sr)
    return f"{path}: synthetic voice (flite is not installed)"


def _encoder_weights(tmp: str) -> str:
    """The real pretrained GE2E weights ``make install`` fetched, else random ones (said so)."""
    from speechblocks.audio_commands import default_encoder_path

    path = default_encoder_path()
    if path:
        print(f"GE2E weights: {path} (resemblyzer's pretrained encoder)")
        return path
    import torch

    import torch_layers

    path = os.path.join(tmp, "encoder.pt")
    torch.manual_seed(0)
    torch.save({"model_state": torch_layers.SpeakerEncoder().state_dict(), "step": 0}, path)
    print("note: no pretrained GE2E weights (make install could not fetch them): a random-weight encoder")
    return path


def _step(msg: str) -> None:
    print(f"\n== {msg} ==", flush=True)


def _cpu_seconds() -> tuple[float, float]:
    """``(this process, its subprocesses)`` CPU seconds: ``getrusage`` of ``RUSAGE_SELF`` and ``RUSAGE_CHILDREN``
    (the reaped ones), plus the legacy reference's subprocess while it still runs (reaped only at exit)."""
    import resource

    from . import reference
    from .demo_tacotron1 import _process_cpu_seconds

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = reference._SERVER.proc
    live = _process_cpu_seconds(proc.pid) if proc is not None and proc.poll() is None else 0.0
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime + live


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _timing(t0: float, load0: str, t2_seconds: float | None, background) -> None:
    """The closing figures: total wall and CPU, the load average, the Tacotron-2 part's and the Tacotron-1
    section's main-thread times (the section's is what it adds to the wall clock) and the background's."""
    from .demo_tacotron1 import timing_lines

    wall = time.perf_counter() - t0
    me, kids = _cpu_seconds()
    _step("timing")
    print(f"load average (1/5/15 min): {load0} at the start, {_load()} at the end; {os.cpu_count()} CPUs")
    if t2_seconds is not None:
        print(f"Tacotron-2 part (steps 1-7), main thread: {t2_seconds:.1f} s wall")
    if background is not None:
        for line in timing_lines(background, t0):
            print(line)
    print(f"demo: {wall:.1f} s wall, {me + kids:.1f} s CPU (this process {me:.1f} s, subprocesses {kids:.1f} s)")
    if background is not None and t2_seconds is not None:
        sec = background.section.get("main", 0.0)
        print(f"TACOTRON-1 SECTION ADDED {sec:.1f} s TO THE WALL CLOCK (its main-thread time; the background ran "
              f"beside the Tacotron-2 part). Cross-check on a quiet machine: this wall ({wall:.1f} s) minus that "
              f"of `python -m parity_tests.demo --only tacotron2`")


def _parse(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m parity_tests.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("tacotron2", "tacotron1"),
                        help="tacotron2: steps 1-7 alone (the baseline of the Tacotron-1 section's increment); "
                             "tacotron1: steps 8-12 alone (TensorFlow, Keras and torch imported first, as the "
                             "Tacotron-2 part leaves them; the background has nothing to overlap: its wait is "
                             "shown)")
    return parser.parse_args(argv)


def _warm_imports() -> None:
    """What the Tacotron-2 part leaves imported when the section starts (``--only tacotron1``)."""
    t = time.perf_counter()
    import keras  # noqa: F401
    import tensorflow  # noqa: F401
    import torch  # noqa: F401

    import tf_layers  # noqa: F401
    import torch_layers  # noqa: F401
    from speechblocks.cli import main  # noqa: F401

    print(f"(TensorFlow, Keras, torch and the libraries imported first, as in the whole demo: "
          f"{time.perf_counter() - t:.1f} s, not counted in the section)", flush=True)


def main(argv=None) -> int:
    args = _parse(argv)
    t0, load0 = time.perf_counter(), _load()
    out_dir = os.environ.get("SPEECHBLOCKS_DEMO_OUT", "demo-output")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="speechblocks-demo-") as tmp:
        background, rows, rc, t2_seconds = None, [], 0, None
        if args.only != "tacotron2":
            if args.only == "tacotron1":
                _warm_imports()
            from .demo_tacotron1 import start_background

            # steps 8 and 11's TF1 graphs, on their own TF1 subprocess beside the Tacotron-2 part (whose step 1
            # keeps the other core busy with its own legacy subprocess while this process waits)
            background = start_background(tmp)
        if args.only != "tacotron1":
            rc, rows = _tacotron2_part(tmp, out_dir, t0)
            t2_seconds = time.perf_counter() - t0
        if not rc and background is not None:
            from .demo_tacotron1 import tacotron1_section

            rc, t1_rows = tacotron1_section(tmp, out_dir, background)
            rows += t1_rows
    if not rc:
        failed = sum(not r.passed for r in rows)
        print(f"\n{len(rows)} rows, {len(rows) - failed} PASS, {failed} FAIL; demo finished in "
              f"{time.perf_counter() - t0:.0f} s")
    _timing(t0, load0, t2_seconds, background)
    if rc:
        return rc
    return 0 if rows and not failed else 1


def _tacotron2_part(tmp: str, out_dir: str, t0: float) -> tuple[int, list[Row]]:
    """Steps 1-7; returns ``(exit status of the first failing command or 0, rows)``."""
    from speechblocks.cli import main as cli_main

    from .reference import run_legacy

    _step("1. legacy TF1 checkpoint (TF1 RTVC synthesizer default sizes, one Adam step)")
    # random weights would fire the stop token at once: its bias is fixed at -30 so that synthesis decodes to
    # --max-iters (and the alignment picture has something to show)
    stop_bias = "decoder/stop_token_projection/projection_stop_token_projection/bias"  # relative to the model scope
    (legacy,) = run_legacy([legacy_model_spec("rtvc", time_steps=5, assign={stop_bias: [-30.0, -30.0]})])
    ckpt = legacy.checkpoint
    size = sum(os.path.getsize(os.path.join(os.path.dirname(ckpt), f)) for f in os.listdir(os.path.dirname(ckpt))
               if f.startswith("model.ckpt"))
    print(f"{ckpt} ({size / 2**20:.0f} MiB on disk) in {time.perf_counter() - t0:.0f} s")

    _step(f"2. speechblocks inspect {ckpt}")
    rc = cli_main(["inspect", ckpt])
    if rc:
        return rc, []
    keras_file = os.path.join(tmp, "tacotron2.weights.h5")
    torch_file = os.path.join(tmp, "tacotron2.pt")
    for to, out in (("keras", keras_file), ("torch", torch_file)):
        _step(f"3. speechblocks migrate {os.path.basename(ckpt)} --to {to} {os.path.basename(out)}")
        rc = cli_main(["migrate", ckpt, "--to", to, out])
        if rc:
            return rc, []

    _step("4. TF1 graph vs migrated Keras vs migrated torch blocks, same inputs")
    import torch_layers
    from tf_layers.checkpoint import load_migrated

    keep = set(legacy.spec.config["blocks"])  # the blocks the legacy graph ran on its own inputs
    keras_blocks = {k: v for k, v in load_migrated(keras_file).items() if k in keep}
    torch_blocks = {k: v for k, v in torch_layers.load_migrated(torch_file).items() if k in keep}
    rows = parity_rows(legacy, keras_blocks, torch_blocks)
    print(format_table(rows))

    _step(f"5. speechblocks parity --checkpoint {os.path.basename(ckpt)} --steps 10 (the whole model)")
    from .checkpoint_parity import run_checkpoint_parity

    model_rows = [r for r in run_checkpoint_parity(ckpt, steps=10, batch=1) if r.block.startswith("Tacotron2")]
    print(format_table(model_rows))
    rows += model_rows

    sentence = "Scientists at the CERN laboratory say they have discovered a new particle."
    reference = os.path.join(out_dir, "reference.wav")
    _step("6. a recorded reference voice -> the GE2E speaker embedding (speechblocks embed)")
    print(_record_reference(reference))
    encoder = _encoder_weights(tmp)
    spk = os.path.join(out_dir, "speaker.npy")
    rc = cli_main(["embed", "--encoder", encoder, reference, "--out", spk])
    if rc:
        return rc, rows
    mels = {}
    for framework, source in (("torch", torch_file), ("keras", keras_file)):
        mels[framework] = os.path.join(out_dir, f"mel_{framework}.npy")
        argv = ["synthesize", source, "--framework", framework, "--text", sentence, "--max-iters", "150",
                "--set", "tacotron_dropout_rate=0", "--out", mels[framework]]
        if framework == "torch":  # the speaker from the recording, the wav by Griffin-Lim in torch
            argv += ["--speaker-wav", reference, "--encoder", encoder, "--wav",
                     "--plot", os.path.join(out_dir, "alignment.png")]
        else:  # the embedding `embed` wrote: the same numbers
            argv += ["--speaker-embedding", spk]
        _step("7. speechblocks " + " ".join(os.path.basename(a) if os.sep in a else a for a in argv))
        t = time.perf_counter()
        rc = cli_main(argv)
        if rc:
            return rc, rows
        print(f"({time.perf_counter() - t:.1f} s)")
    rows.append(compare("Tacotron2 synthesize", "Keras<->torch", "mel_outputs (CLI, 150 steps)",
                        np.load(mels["keras"]), np.load(mels["torch"]), 1e-4))
    wav = os.path.splitext(mels["torch"])[0] + ".wav"
    import soundfile

    info = soundfile.info(wav)
    print(f"\n{wav}: {info.frames / info.samplerate:.2f} s at {info.samplerate} Hz, {info.subtype} -- the weights "
          "are random (the stop token held off for 150 steps): it babbles; a trained checkpoint speaks")
    print()
    print(format_table(rows[-1:]))
    return 0, rows


if __name__ == "__main__":
    sys.exit(main())
