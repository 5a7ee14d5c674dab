"""``speechblocks synthesize``: text to mel spectrograms with a migrated model or a TF1 checkpoint.

The steps, each usable on its own: :func:`read_texts` / :func:`encode_texts` (the original cleaners and symbol
table, strict: characters outside the table are an error naming them), :func:`load_model` (Keras or torch, from a
migrated file or a TF1 checkpoint), :func:`synthesize` (one padded batch; per sentence the frames up to its own
stop), :func:`write_outputs` (``.npy`` per sentence and optional pictures, all or nothing). Every input is checked
before anything is decoded or written. Frameworks are imported only inside the functions that need them.
"""
from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from .atomic_files import write_all
from .errors import UsageError

__all__ = ["SynthesisResult", "read_texts", "encode_texts", "output_paths", "output_files", "make_output_directory",
           "plot_paths", "require_matplotlib",
           "read_speaker_embedding", "source_kind", "load_model", "check_speaker_embedding", "synthesize",
           "write_outputs", "TerminalProgress"]


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


def load_model(source: str, kind: str, framework: str, hparams=None, overrides=None, seed: int | None = 0):
    """The Tacotron-2 in ``framework`` from a migrated file (``kind`` ``"keras"``/``"torch"``) or a TF1 checkpoint."""
    overrides = dict(overrides or {})
    if framework == "keras":
        import keras

        import tf_layers

        if seed is not None:
            keras.utils.set_random_seed(seed)  # the pre-net's seed generator draws from it when the model is built
        if kind == "tf1":
            return tf_layers.Tacotron2.from_tf1_checkpoint(source, hparams, **overrides)
        return tf_layers.Tacotron2.from_migrated(source, hparams, **overrides)
    import torch_layers

    if kind == "tf1":
        return torch_layers.Tacotron2.from_tf1_checkpoint(source, hparams, **overrides)
    return torch_layers.Tacotron2.from_migrated(source, hparams, **overrides)


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
               progress=None, texts: list[str] | None = None) -> list[SynthesisResult]:
    """Decodes every sentence in one padded batch (``model.synthesize_batch``); each result is cut to the
    sentence's own stop, which equals running it alone (docs/ARCHITECTURE.md, tolerances)."""
    if framework == "torch" and seed is not None:
        import torch

        torch.manual_seed(seed)
    sequences = [ids for _, ids in encoded]
    outs = model.synthesize_batch(sequences, speaker_embeddings=embeddings, max_iters=max_iters, progress=progress)
    results = []
    for i, ((cleaned, ids), out) in enumerate(zip(encoded, outs)):
        results.append(SynthesisResult(texts[i] if texts else cleaned, cleaned, list(ids), out["mel_outputs"],
                                       out["alignments"], out["stop_token_prediction"], int(out["alignments"].shape[1]),
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

