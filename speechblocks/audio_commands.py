"""The audio side of the command line: ``mel``, ``griffin-lim``, ``embed`` and the wavs of ``synthesize``.

Each step checks every input before anything is computed or written, and writes through temporary files renamed
at the end (all or nothing). Frameworks are imported only by the functions that need them; the Griffin-Lim of the
command line runs in torch by default (the fast path), in TensorFlow with ``--framework keras`` and in numpy (the
original loop) with ``--framework numpy``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .atomic_files import write_all
from .errors import InputError, UsageError
from .synthesis import make_output_directory, output_files

__all__ = ["GL_FRAMEWORKS", "audio_hparams_for", "model_audio_hparams", "read_spectrogram", "griffin_lim_wavs",
           "wav_output_paths", "write_wavs", "default_encoder_path", "load_speaker_encoder", "embed_wavs",
           "write_arrays"]

GL_FRAMEWORKS = ("torch", "keras", "numpy")
#: the model hparams that are also audio hparams (a migrated file stores them)
_SHARED = ("sample_rate", "num_mels", "symmetric_mels", "max_abs_value")
#: where ``make install`` puts resemblyzer's pretrained GE2E weights
_ASSET = os.path.join(".venv", "assets", "resemblyzer", "pretrained.pt")


def audio_hparams_for(preset, overrides: dict | None = None):
    """The audio hparams of ``--hparams`` (a preset or a mapping of original names) with the ``--set`` names that
    are audio hparams applied (the others belong to the model)."""
    from .audio import audio_hparams
    from .audio.params import AUDIO_HPARAM_NAMES

    own = {k: v for k, v in (overrides or {}).items() if k in AUDIO_HPARAM_NAMES}
    if isinstance(preset, dict):
        own = {**{k: v for k, v in preset.items() if k in AUDIO_HPARAM_NAMES}, **own}
        preset = "rtvc" if preset.get("speaker_embedding_size") else "rayhane"
    return audio_hparams(preset or "rtvc", **own)


def model_audio_hparams(model, overrides: dict | None = None):
    """The audio hparams of a loaded Tacotron-2: its preset's (RTVC when it has a speaker embedding, else
    Rayhane's), with the values the model itself stores (sample rate, mels, normalisation range) and ``--set``."""
    hp = model.hparams
    stored = {k: getattr(hp, k) for k in _SHARED}
    return audio_hparams_for(hp.variant, {**stored, **(overrides or {})})


def read_spectrogram(path: str, channels: int, what: str) -> np.ndarray:
    """A ``(frames, channels)`` float32 spectrogram from a ``.npy`` file, checked (shape, finite values)."""
    try:
        x = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{path!r} does not exist") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{path!r} is not a readable .npy array ({e})") from None
    if x.ndim != 2 or x.shape[1] != channels or x.shape[0] < 1:
        raise UsageError(f"{path!r} must hold a {what} of shape (frames, {channels}); got {list(x.shape)}")
    if x.dtype.kind not in "fiu":
        raise UsageError(f"{path!r} must hold numbers; got dtype {x.dtype}")
    if not np.all(np.isfinite(x)):
        raise UsageError(f"{path!r} holds NaN or inf: no waveform written")
    return np.asarray(x, np.float32)


def _torch_gl(spectrogram, hp, n_iter, seed, linear, device=None):
    import math

    import torch

    from torch_layers.griffin_lim import inv_linear_spectrogram, inv_mel_spectrogram

    inverse = inv_linear_spectrogram if linear else inv_mel_spectrogram
    with torch.inference_mode():
        g = torch.Generator().manual_seed(seed)
        if device is None or torch.device(device).type == "cpu":
            return inverse(torch.from_numpy(spectrogram)[None], hp, n_iter=n_iter, generator=g)[0].numpy()
        # on a GPU: the initial phases drawn on the CPU as there (the same seed, the same phases), then moved
        rand = torch.rand((1, hp.n_fft // 2 + 1, spectrogram.shape[0]), generator=g, dtype=torch.float32)
        angles = torch.polar(torch.ones_like(rand), (2.0 * math.pi) * rand)[0]
        x = torch.from_numpy(spectrogram)[None].to(device)
        return inverse(x, hp, n_iter=n_iter, angles=angles.to(device))[0].cpu().numpy()


def _keras_gl(spectrogram, hp, n_iter, seed, linear):
    from tf_layers.griffin_lim import inv_linear_spectrogram, inv_mel_spectrogram

    inverse = inv_linear_spectrogram if linear else inv_mel_spectrogram
    return np.asarray(inverse(spectrogram[None], hp, n_iter=n_iter, seed=seed))[0]


def _numpy_gl(spectrogram, hp, n_iter, seed, linear):
    from . import audio

    inverse = audio.inv_linear_spectrogram if linear else audio.inv_mel_spectrogram
    return inverse(spectrogram, hp, n_iter=n_iter, seed=seed)


def griffin_lim_wavs(spectrograms: list[np.ndarray], hp, framework: str = "torch", n_iter: int | None = None,
                     seed: int = 0, linear: bool = False, progress=None, device=None) -> list[np.ndarray]:
    """Waveforms of ``(frames, num_mels)`` mel (or ``(frames, num_freq)`` linear) spectrograms: Griffin-Lim with the
    audio hparams ``hp`` in ``framework``; sentence ``i`` draws its initial phases from ``seed + i`` (on the CPU,
    also when torch runs it on ``device``, a GPU: the same phases)."""
    if framework not in GL_FRAMEWORKS:
        raise UsageError(f"--framework must be one of {', '.join(GL_FRAMEWORKS)}; got {framework!r}")
    if n_iter is not None and n_iter < 0:
        raise UsageError(f"--griffin-lim-iters must be >= 0; got {n_iter}")
    run = {"torch": _torch_gl, "keras": _keras_gl, "numpy": _numpy_gl}[framework]
    wavs = []
    for i, s in enumerate(spectrograms):
        if progress is not None:
            progress(f"Griffin-Lim {i + 1}/{len(spectrograms)} ({s.shape[0]} frames)")
        wavs.append(run(s, hp, n_iter, seed + i, linear, device) if framework == "torch" else
                    run(s, hp, n_iter, seed + i, linear))
    for i, w in enumerate(wavs):
        if not np.all(np.isfinite(w)):  # never a NaN waveform on disk; finite spectrograms too large to invert
            raise InputError(f"Griffin-Lim of spectrogram {i} gave a non-finite waveform")
    return wavs


def wav_output_paths(value, npy_paths: list[str]) -> list[str]:
    """``synthesize --wav [PATH]``: without PATH each ``.wav`` sits beside its ``.npy``; one sentence may name the
    file; several sentences name a directory."""
    if value is True or value is None:
        return [os.path.splitext(p)[0] + ".wav" for p in npy_paths]
    return output_files(value, [os.path.splitext(os.path.basename(p))[0] for p in npy_paths], ".wav", "--wav")


def write_wavs(wavs: list[np.ndarray], paths: list[str], sample_rate: int) -> None:
    """Writes every wav (the original's peak-normalised int16) through temporary files: all or nothing."""
    from .audio import save_wav

    make_output_directory(paths)
    write_all([(path, lambda tmp, wav=wav: save_wav(wav, tmp, sample_rate)) for wav, path in zip(wavs, paths)])


def write_arrays(arrays: list[np.ndarray], paths: list[str]) -> None:
    """Writes every array as float32 ``.npy`` through temporary files: all or nothing."""
    make_output_directory(paths)
    write_all([(path, lambda tmp, a=a: np.save(tmp, np.asarray(a, np.float32))) for a, path in zip(arrays, paths)])



def default_encoder_path() -> str | None:
    """``$SPEECHBLOCKS_GE2E_WEIGHTS``, else the weights ``make install`` fetched (``.venv/assets/...``), else None."""
    env = os.environ.get("SPEECHBLOCKS_GE2E_WEIGHTS")
    if env:
        return env
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), _ASSET)
    for candidate in (here, os.path.join(sys.prefix, "assets", "resemblyzer", "pretrained.pt")):
        if os.path.isfile(candidate):
            return candidate
    return None


def load_speaker_encoder(path: str | None, framework: str = "torch", device=None):
    """The GE2E ``SpeakerEncoder`` of ``--encoder`` (RTVC ``encoder.pt`` or resemblyzer's ``pretrained.pt``); torch:
    on ``device`` (a ``torch.device``; default the CPU)."""
    path = path or default_encoder_path()
    if path is None:
        raise UsageError("no speaker encoder: give --encoder ENCODER.pt (RTVC's encoder.pt or resemblyzer's "
                         "pretrained.pt; `make install` fetches the latter)")
    if not os.path.isfile(path):
        raise UsageError(f"--encoder {path!r} does not exist")
    if framework == "keras":
        import tf_layers

        return tf_layers.SpeakerEncoder.from_torch_checkpoint(path)
    import torch_layers

    encoder = torch_layers.SpeakerEncoder.from_checkpoint(path).eval()
    return encoder if device is None else encoder.to(device)


def embed_wavs(encoder, paths: list[str], progress=None) -> list[np.ndarray]:
    """The GE2E embedding ``(embedding_size,)`` of each recording (the original ``embed_utterance`` of its
    ``preprocess_wav``)."""
    out = []
    for i, p in enumerate(paths):
        if not os.path.isfile(p):
            raise UsageError(f"{p!r} does not exist")
        if progress is not None:
            progress(f"embedding {i + 1}/{len(paths)}: {os.path.basename(p)}")
        out.append(np.asarray(encoder.embed_wav(p), np.float32))
    return out
