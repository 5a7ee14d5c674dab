"""``speechblocks synthesize``: text to mel spectrograms with a migrated model or a TF1 checkpoint.

The steps, each usable on its own: :func:`read_texts` / :func:`encode_texts` (the original cleaners and symbol
table, strict: characters outside the table are an error naming them), :func:`load_model` (Keras or torch, from a
migrated file or a TF1 checkpoint), :func:`synthesize` (one padded batch; per sentence the frames up to its own
stop), :func:`write_outputs` (``.npy`` per sentence and optional pictures, all or nothing). Every input is checked
before anything is decoded or written. Frameworks are imported only inside the functions that need them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time

import numpy as np

from .atomic_files import write_all
from .errors import UsageError

__all__ = ["SynthesisResult", "read_texts", "encode_texts", "output_paths", "output_files", "make_output_directory",
           "plot_paths", "require_matplotlib",
           "read_speaker_embedding", "source_kind", "load_model", "check_speaker_embedding", "synthesize",
           "write_outputs", "TerminalProgress", "precision_scope", "decoder_loop_line", "precision_error"]


def _usage(message: str) -> Exception:
    return UsageError(message)


@dataclasses.dataclass
class SynthesisResult:
    """One sentence's output.

    Attributes:
        text: the sentence as given.
        cleaned: the text after the cleaners (what the ids spell).
        ids: the symbol ids fed to the model (EOS included).
        mel: ``[frames, num_mels]`` mel outputs (after the postnet), up to the sentence's own stop.
        alignment: ``[T_in, steps]`` attention alignments.
        stop: ``[frames]`` stop probabilities.
        steps: decoder steps kept for this sentence.
        stopped: whether its stop rule fired (else ``max_iters`` cut it).
    """

    text: str
    cleaned: str
    ids: list
    mel: np.ndarray
    alignment: np.ndarray
    stop: np.ndarray
    steps: int
    stopped: bool


def read_texts(texts, text_file) -> list[str]:
    """The sentences of ``--text`` (each one sentence) then ``--text-file`` (one per non-empty line)."""
    out = list(texts or [])
    if text_file is not None:
        try:
            with open(text_file, encoding="utf-8") as f:
                out += [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            raise _usage(f"--text-file {text_file!r} does not exist") from None
        except (OSError, UnicodeDecodeError) as e:
            raise _usage(f"--text-file {text_file!r} is not readable UTF-8 text ({type(e).__name__})") from None
    if not out:
        raise _usage("no text: give --text \"...\" or --text-file FILE")
    for i, t in enumerate(out):
        if not t.strip():
            raise _usage(f"sentence {i + 1} is empty")
    return out


def encode_texts(texts: list[str], cleaners=("english_cleaners",)) -> list[tuple[str, list[int]]]:
    """``[(cleaned text, ids)]`` per sentence, strictly: unknown cleaners, characters outside the symbol table and
    texts that clean to nothing are errors (the original dropped such characters silently)."""
    from .text import clean_text, get_cleaner, text_to_sequence

    for name in cleaners:
        try:
            get_cleaner(name)
        except ValueError as e:
            raise _usage(str(e)) from None
    out = []
    for i, t in enumerate(texts):
        where = f"sentence {i + 1}" if len(texts) > 1 else "the text"
        try:
            ids = text_to_sequence(t, cleaners, strict=True)
        except ValueError as e:
            raise _usage(f"{where}: {e}") from None
        out.append((clean_text(t, cleaners), ids))
    return out


def output_paths(out: str, n: int) -> list[str]:
    """``--out``: one sentence -> the ``.npy`` file (or ``000.npy`` in a directory); several -> ``DIR/000.npy`` ...
    The directory is created if missing (its parent must exist); nothing is written yet."""
    width = max(3, len(str(n - 1)))
    return output_files(out, [f"{i:0{width}d}" for i in range(n)], noun="sentence")


def make_output_directory(paths: list[str]) -> None:
    """Creates the directory of several :func:`output_files` (their checks allowed it: its parent exists)."""
    if len(paths) > 1:
        os.makedirs(os.path.dirname(os.path.abspath(paths[0])), exist_ok=True)


def output_files(out: str, stems: list[str], ext: str = ".npy", option: str = "--out",
                 noun: str = "input") -> list[str]:
    """The output file of each input: one input -> ``out`` itself (a file ending in ``ext``) or ``out/<stem><ext>``
    when ``out`` is a directory; several -> ``out/<stem><ext>`` each (``out`` created later; its parent must
    exist). Checked before anything is computed; nothing is written here."""
    out = os.fspath(out)
    if len(stems) == 1 and not os.path.isdir(out) and not out.endswith(os.sep):
        if not out.endswith(ext):
            raise _usage(f"{option} {out!r}: for one {noun} give a {ext} file (or a directory)")
        parent = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(parent):
            raise _usage(f"{option} {out!r}: directory {parent!r} does not exist")
        return [out]
    if os.path.exists(out) and not os.path.isdir(out):
        raise _usage(f"{option} {out!r}: {len(stems)} {noun}s need a directory, and this is a file")
    parent = os.path.dirname(os.path.abspath(out.rstrip(os.sep)))
    if not os.path.isdir(parent):
        raise _usage(f"{option} {out!r}: directory {parent!r} does not exist")
    if len(set(stems)) != len(stems):
        raise _usage(f"{option} {out!r}: two {noun}s have the same name; write them one at a time")
    return [os.path.join(out, stem + ext) for stem in stems]


def plot_paths(plot: str, n: int, outputs: list[str] = ()) -> list[str]:
    """``--plot``: the picture file(s); several sentences add ``_000``, ``_001`` ... before the extension. Its
    directory must exist or be the output directory (created with the outputs)."""
    stem, ext = os.path.splitext(plot)
    ext = ext or ".png"
    directory = os.path.dirname(os.path.abspath(plot))
    if not os.path.isdir(directory) and directory not in {os.path.dirname(os.path.abspath(p)) for p in outputs}:
        raise _usage(f"--plot {plot!r}: directory {os.path.dirname(os.path.abspath(plot))!r} does not exist")
    if n == 1:
        return [stem + ext]
    width = max(3, len(str(n - 1)))
    return [f"{stem}_{i:0{width}d}{ext}" for i in range(n)]


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise _usage("--plot needs matplotlib: pip install 'speechblocks[plot]' (or pip install matplotlib)") from None


def read_speaker_embedding(path, n: int) -> np.ndarray | None:
    """``--speaker-embedding EMB.npy``: ``[E]`` or ``[1, E]`` (every sentence) or ``[n, E]`` -> ``[n, E]`` float32."""
    if path is None:
        return None
    try:
        e = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise _usage(f"--speaker-embedding {path!r} does not exist") from None
    except (OSError, ValueError) as err:
        raise _usage(f"--speaker-embedding {path!r} is not a readable .npy array ({err})") from None
    if e.dtype.kind not in "fiu":
        raise _usage(f"--speaker-embedding {path!r} must hold numbers; got dtype {e.dtype}")
    if e.ndim == 1:
        e = np.broadcast_to(e, (n, e.shape[0]))
    elif e.ndim == 2 and e.shape[0] == 1:
        e = np.broadcast_to(e, (n, e.shape[1]))
    elif not (e.ndim == 2 and e.shape[0] == n):
        raise _usage(f"--speaker-embedding {path!r} must have shape [E], [1, E] or [sentences={n}, E]; "
                     f"got {list(e.shape)}")
    if not np.all(np.isfinite(e)):
        raise _usage(f"--speaker-embedding {path!r} holds NaN or inf")
    return np.array(e, dtype=np.float32)  # a writable copy (broadcast views are read-only)


def source_kind(source: str, framework: str | None) -> tuple[str, str]:
    """``(kind, framework)``: kind ``"keras"``/``"torch"`` (a migrated file) or ``"tf1"`` (a checkpoint)."""
    from .migration.migrated_file import file_kind

    source = os.fspath(source)
    if os.path.isfile(source) and not source.endswith(".index"):
        try:
            kind = file_kind(source)
        except ValueError as e:
            raise _usage(str(e)) from None
        if kind == "torch" and framework == "keras":
            raise _usage(f"{source!r} is a torch file: Keras cannot read it; use --framework torch, or migrate the "
                         "checkpoint with --to keras")
        return kind, framework or kind
    if not (os.path.exists(source) or os.path.exists(source + ".index")):
        raise _usage(f"{source!r} does not exist (neither a migrated file nor a TF1 checkpoint)")
    return "tf1", framework or "keras"


def load_model(source: str, kind: str, framework: str, hparams=None, overrides=None, seed: int | None = 0,
               device=None, precision: str = "fp32"):
    """The Tacotron-2 in ``framework`` from a migrated file (``kind`` ``"keras"``/``"torch"``) or a TF1 checkpoint.

    ``device`` (torch): a ``torch.device`` the model is moved to (default: the CPU). ``precision`` (Keras):
    ``"bf16"`` builds the model under the ``mixed_bfloat16`` policy (float32 weights, bfloat16 compute); torch
    keeps float32 weights and runs :func:`synthesize` under autocast instead."""
    overrides = dict(overrides or {})
    if framework == "keras":
        import keras

        import tf_layers

        if seed is not None:
            keras.utils.set_random_seed(seed)  # the pre-net's seed generator draws from it when the model is built
        with precision_scope("keras", precision):
            if kind == "tf1":
                return tf_layers.Tacotron2.from_tf1_checkpoint(source, hparams, **overrides)
            return tf_layers.Tacotron2.from_migrated(source, hparams, **overrides)
    import torch_layers

    if kind == "tf1":
        model = torch_layers.Tacotron2.from_tf1_checkpoint(source, hparams, **overrides)
    else:
        model = torch_layers.Tacotron2.from_migrated(source, hparams, **overrides)
    return model if device is None else model.to(device)


@contextlib.contextmanager
def precision_scope(framework: str, precision: str = "fp32", device=None):
    """The numeric precision of ``--precision``: ``"fp32"`` nothing; ``"bf16"``: torch -- ``torch.autocast`` on
    ``device``'s type (default the CPU) in bfloat16 (autocast's own lists choose the operations that run in it);
    Keras -- the ``mixed_bfloat16`` global dtype policy while models are built (restored afterwards)."""
    if precision == "fp32":
        yield
        return
    if precision != "bf16":
        raise UsageError(f"--precision must be one of fp32, bf16; got {precision!r}")
    if framework == "torch":
        import torch

        with torch.autocast(torch.device(device or "cpu").type, dtype=torch.bfloat16):
            yield
        return
    import keras

    saved = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        yield
    finally:
        keras.config.set_dtype_policy(saved)


def decoder_loop_line(model, framework: str, batch: int, precision: str = "fp32") -> str:
    """Which decoder loop a free-running synthesis of ``batch`` sentences runs, and why, as
    :func:`torch_layers.decoding_plan.plan_decoding` (or the Keras one) decides it for the model's device and
    ``precision`` (``"decoder loop: native-step"``: the C step on the CPU; on a GPU or in bfloat16 the framework's
    own loop)."""
    hp = model.hparams
    size = 2 * int(hp.encoder_lstm_units) + int(hp.speaker_embedding_size or 0)
    if framework == "torch":
        import torch

        from torch_layers.decoding_plan import plan_decoding

        device = model.embedding.weight.device
        with torch.no_grad(), precision_scope("torch", precision, device):
            memory = torch.zeros((batch, 1, size), device=device)
            return str(plan_decoding(model.decoder, memory, training=False, stop_each=batch > 1))
    import tensorflow as tf

    from tf_layers.decoding_plan import plan_decoding

    memory = tf.zeros((batch, 1, size), dtype=model.decoder.compute_dtype)
    return str(plan_decoding(model.decoder, memory, stop_each=batch > 1))


def precision_error(reference: list[SynthesisResult], results: list[SynthesisResult]) -> dict:
    """How far ``results`` (e.g. ``--precision bf16``) are from ``reference`` (float32), sentence by sentence over
    the frames both kept: ``mel_max_abs`` / ``mel_mean_abs`` (the largest and the mean ``|Δ|`` of the mel outputs),
    ``argmax_agreement`` (the share of decoder steps whose alignment argmax -- the attended symbol -- is the same),
    ``stop_steps`` (``[reference, results]`` per sentence) and ``stopped`` (both)."""
    maxes, means, agree, steps, stopped = [], [], [], [], []
    for a, b in zip(reference, results, strict=True):
        n = min(a.mel.shape[0], b.mel.shape[0])
        d = np.abs(np.asarray(a.mel[:n], np.float64) - np.asarray(b.mel[:n], np.float64))
        maxes.append(float(d.max()) if n else 0.0)
        means.append(float(d.mean()) if n else 0.0)
        k = min(a.alignment.shape[1], b.alignment.shape[1])
        agree.append(float(np.mean(a.alignment[:, :k].argmax(0) == b.alignment[:, :k].argmax(0))) if k else 1.0)
        steps.append([int(a.steps), int(b.steps)])
        stopped.append([bool(a.stopped), bool(b.stopped)])
    return {"mel_max_abs": max(maxes), "mel_mean_abs": float(np.mean(means)), "argmax_agreement": float(np.mean(agree)),
            "stop_steps": steps, "stopped": stopped}


def check_speaker_embedding(model, embedding: np.ndarray | None, path, n: int) -> np.ndarray | None:
    """The embeddings the model needs: required (and of its size) for an RTVC model, refused for Rayhane's."""
    size = model.hparams.speaker_embedding_size
    if size:
        if embedding is None:
            raise _usage(f"this model has a speaker embedding (speaker_embedding_size={size}): give "
                         "--speaker-embedding EMB.npy")
        if embedding.shape[1] != size:
            raise _usage(f"--speaker-embedding {path!r} has size {embedding.shape[1]}; this model needs "
                         f"speaker_embedding_size={size}")
        return embedding
    if embedding is not None:
        raise _usage("this model has no speaker embedding (a Rayhane-style model): drop --speaker-embedding")
    return None


class TerminalProgress:
    """One self-overwriting stderr line: decoder steps done and the largest stop probability."""

    def __init__(self, stream, max_iters: int, every: float = 0.1):
        self.stream, self.max_iters, self.every = stream, max_iters, every
        self._last = 0.0
        self.steps = 0

    def __call__(self, step: int, stop_probability: float) -> None:
        self.steps = step
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self.stream.write(f"\rdecoding: step {step}/{self.max_iters}, stop probability {stop_probability:.3f}  ")
            self.stream.flush()

    def close(self) -> None:
        if self._last:
            self.stream.write(f"\rdecoding: {self.steps} steps done{' ' * 30}\n")
            self.stream.flush()


def synthesize(model, framework: str, encoded: list[tuple[str, list[int]]], embeddings, max_iters, seed,
               progress=None, texts: list[str] | None = None, precision: str = "fp32") -> list[SynthesisResult]:
    """Decodes every sentence in one padded batch (``model.synthesize_batch``); each result is cut to the
    sentence's own stop, which equals running it alone (docs/ARCHITECTURE.md, tolerances). ``precision="bf16"``
    (torch): under :func:`precision_scope` (autocast on the model's device); a Keras model's precision is its
    dtype policy (:func:`load_model`). The results are float32 arrays."""
    if framework == "torch" and seed is not None:
        import torch

        torch.manual_seed(seed)
    sequences = [ids for _, ids in encoded]
    device = model.embedding.weight.device if framework == "torch" else None
    with precision_scope(framework, precision if framework == "torch" else "fp32", device):
        outs = model.synthesize_batch(sequences, speaker_embeddings=embeddings, max_iters=max_iters,
                                      progress=progress)
    results = []
    for i, ((cleaned, ids), out) in enumerate(zip(encoded, outs)):
        f32 = {k: np.asarray(out[k], np.float32) for k in ("mel_outputs", "alignments", "stop_token_prediction")}
        results.append(SynthesisResult(texts[i] if texts else cleaned, cleaned, list(ids), f32["mel_outputs"],
                                       f32["alignments"], f32["stop_token_prediction"], int(f32["alignments"].shape[1]),
                                       bool(out["stopped"])))
    return results


def _plot(path: str, result: SynthesisResult) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, (ax_a, ax_m) = plt.subplots(2, 1, figsize=(10, 7))
    im = ax_a.imshow(result.alignment, aspect="auto", origin="lower", interpolation="none")
    ax_a.set_title(f"alignment: {result.cleaned[:80]}", fontsize=9)
    ax_a.set_xlabel("decoder step")
    ax_a.set_ylabel("encoder step (symbol)")
    fig.colorbar(im, ax=ax_a)
    im = ax_m.imshow(result.mel.T, aspect="auto", origin="lower", interpolation="none")
    ax_m.set_title(f"mel outputs: {result.mel.shape[0]} frames", fontsize=9)
    ax_m.set_xlabel("frame")
    ax_m.set_ylabel("mel channel")
    fig.colorbar(im, ax=ax_m)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(results: list[SynthesisResult], paths: list[str], plots: list[str] | None) -> None:
    """Writes each mel as ``.npy`` (and each picture) through temporary files renamed at the end: all or nothing."""
    make_output_directory(paths)
    jobs = [(path, lambda tmp, r=res: np.save(tmp, np.asarray(r.mel, np.float32)))
            for res, path in zip(results, paths)]
    jobs += [(path, lambda tmp, r=res: _plot(tmp, r)) for res, path in zip(results, plots or ())]
    write_all(jobs)

