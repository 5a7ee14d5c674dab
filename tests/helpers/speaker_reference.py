"""An independent float64 reference of RTVC's speaker-embedding pipeline (``encoder/audio.py``,
``encoder/inference.py``), written from the original formulas for the ``embed_wav`` tests, and the test audio.

Nothing here calls ``speechblocks.audio``: librosa, soundfile, webrtcvad and scipy are called directly with the
original settings; the STFT, the partial slices, the LSTM and the averaging are spelled out by hand.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

SR = 16000
REPO = Path(__file__).resolve().parents[2]


def real_weights_path() -> Path | None:
    """The real GE2E weights (Resemblyzer's ``pretrained.pt``): ``$SPEECHBLOCKS_GE2E_WEIGHTS``, else
    ``.venv/assets/resemblyzer/pretrained.pt``; ``None`` when absent."""
    env = os.environ.get("SPEECHBLOCKS_GE2E_WEIGHTS")
    path = Path(env) if env else REPO / ".venv" / "assets" / "resemblyzer" / "pretrained.pt"
    return path if path.is_file() else None


# -- audio --------------------------------------------------------------------------------------------------
def synthetic_voice(sr: int = 22050, seed: int = 0) -> np.ndarray:
    """~5.9 s: three 0.7 s voiced bursts (harmonics of a gliding 120-180 Hz pitch, a syllable-rate envelope)
    after 1 s pauses, a 0.8 s pause at the end, faint noise everywhere (the detector must cut the pauses)."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(3):
        t = np.arange(int(0.7 * sr)) / sr
        f0 = 120 + 30 * k + 10 * np.sin(2 * np.pi * 3 * t)
        phase = 2 * np.pi * np.cumsum(f0) / sr
        voiced = sum(np.sin(h * phase) / h * (2.0 if h in (3, 4, 8) else 1.0) for h in range(1, 25))
        env = np.sqrt(np.sin(np.pi * t / t[-1])) * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t) ** 2)
        parts += [np.zeros(sr), 0.1 * env * voiced]
    parts.append(np.zeros(int(0.8 * sr)))
    x = np.concatenate(parts)
    return (x + 1e-4 * rng.standard_normal(len(x))).astype(np.float32)


def write_synthetic(tmp_path: Path, sr: int = 22050) -> Path:
    import soundfile

    path = Path(tmp_path) / "synthetic_22k.wav"
    soundfile.write(path, synthetic_voice(sr), sr, subtype="FLOAT")
    return path


def flite_speech(tmp_path: Path, text: str = "The speaker encoder hears this sentence in a clear voice, twice.",
                 voice: str = "slt", name: str = "flite.wav") -> Path | None:
    """``flite -voice slt`` speech (16 kHz), or ``None`` without flite."""
    exe = shutil.which("flite")
    if exe is None:
        return None
    path = Path(tmp_path) / name
    proc = subprocess.run([exe, "-voice", voice, "-t", text, "-o", str(path)], capture_output=True, timeout=60)
    return path if proc.returncode == 0 and path.is_file() else None


# -- the original pipeline, float64 ---------------------------------------------------------------------------
def reference_preprocess(path_or_wav, source_sr: int | None = None) -> np.ndarray:
    """``preprocess_wav``: librosa.load at the native rate, resampling to 16 kHz (librosa's soxr_hq: the
    resampler of the implementation under test, the original's resampy is not reproduced), volume up to
    -30 dBFS, long silences trimmed (webrtcvad mode 3 on 30 ms windows)."""
    import librosa
    import webrtcvad
    from scipy.ndimage import binary_dilation

    if isinstance(path_or_wav, (str, Path)):
        wav, source_sr = librosa.load(str(path_or_wav), sr=None)
    else:
        wav = path_or_wav
    wav = np.asarray(wav, dtype=np.float64)
    if source_sr is not None and source_sr != SR:
        wav = librosa.resample(wav, orig_sr=source_sr, target_sr=SR, res_type="soxr_hq")
    gain_db = -30.0 - 10.0 * math.log10(float(np.mean(wav * wav)))
    if gain_db > 0:
        wav = wav * 10.0 ** (gain_db / 20.0)
    win = 480  # 30 ms at 16 kHz
    n_win = len(wav) // win
    wav = wav[:n_win * win]
    pcm = np.round(wav * 32767.0).astype(np.int16)
    vad = webrtcvad.Vad(3)
    flags = [1.0 if vad.is_speech(pcm[i * win:(i + 1) * win].tobytes(), SR) else 0.0 for i in range(n_win)]
    padded = [0.0] * 3 + flags + [0.0] * 4  # width 8: (8 - 1) // 2 zeros before, 8 // 2 after
    mask = np.array([round(sum(padded[i:i + 8]) / 8.0) for i in range(n_win)], dtype=bool)  # half to even
    mask = binary_dilation(mask, np.ones(7))
    keep = np.zeros(len(wav), dtype=bool)
    for i in np.flatnonzero(mask):
        keep[i * win:(i + 1) * win] = True
    return wav[keep]


def reference_mel(wav: np.ndarray) -> np.ndarray:
    """``(frames, 40)`` power mel of librosa 0.6-0.8's ``melspectrogram(wav, 16000, n_fft=400, hop_length=160,
    n_mels=40)``, by hand: reflect padding of 200 samples, periodic Hann window, |rfft|^2, Slaney mel filters."""
    import librosa

    x = np.pad(np.asarray(wav, dtype=np.float64), 200, mode="reflect")
    n_frames = 1 + (len(x) - 400) // 160
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)
    frames = np.stack([x[i * 160:i * 160 + 400] * window for i in range(n_frames)])
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    basis = librosa.filters.mel(sr=SR, n_fft=400, n_mels=40, fmin=0.0, fmax=SR / 2, htk=False, norm="slaney")
    return power @ basis.T.astype(np.float64)


def reference_slices(n_samples: int, n_partial: int = 160, min_cover: float = 0.75, overlap: float = 0.5):
    """``compute_partial_slices``: ``(wav_slices, mel_slices)`` as lists of ``(start, stop)``."""
    n_frames = math.ceil((n_samples + 1) / 160)
    step = max(int(round(n_partial * (1 - overlap))), 1)
    mel = []
    start = 0
    while start <= max(0, n_frames - n_partial + step):
        mel.append((start, start + n_partial))
        start += step
    last = mel[-1]
    if len(mel) > 1 and (n_samples - last[0] * 160) / (n_partial * 160) < min_cover:
        mel.pop()
    return [(a * 160, b * 160) for a, b in mel], mel


def reference_network(state: dict, frames: np.ndarray) -> np.ndarray:
    """RTVC's ``SpeakerEncoder.forward`` in float64: stacked LSTM (gates i, f, g, o), the last layer's final
    hidden state, linear + ReLU, ``e / (||e|| + 1e-5)``. ``state``: numpy arrays, torch keys."""
    s = {k: np.asarray(v, dtype=np.float64) for k, v in state.items()}
    seq = np.asarray(frames, dtype=np.float64)
    batch, n_t = seq.shape[0], seq.shape[1]
    layer = 0
    while f"lstm.weight_ih_l{layer}" in s:
        w_ih, w_hh = s[f"lstm.weight_ih_l{layer}"], s[f"lstm.weight_hh_l{layer}"]
        b = s[f"lstm.bias_ih_l{layer}"] + s[f"lstm.bias_hh_l{layer}"]
        hid = w_hh.shape[1]
        h, c = np.zeros((batch, hid)), np.zeros((batch, hid))
        xs = seq @ w_ih.T + b
        out = np.empty((batch, n_t, hid))
        for t in range(n_t):
            z = xs[:, t] + h @ w_hh.T
            i, f = 1 / (1 + np.exp(-z[:, :hid])), 1 / (1 + np.exp(-z[:, hid:2 * hid]))
            g, o = np.tanh(z[:, 2 * hid:3 * hid]), 1 / (1 + np.exp(-z[:, 3 * hid:]))
            c = f * c + i * g
            h = o * np.tanh(c)
            out[:, t] = h
        seq = out
        layer += 1
    e = np.maximum(seq[:, -1] @ s["linear.weight"].T + s["linear.bias"], 0.0)
    return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-5)


def reference_embed_utterance(state: dict, wav: np.ndarray, using_partials: bool = True):
    """``embed_utterance``: the waveform zero-padded to the last slice's end, the mel of the padded waveform, its
    windows through the network, the mean over partials divided by its norm. Returns ``(embed, partials,
    wav_slices)`` (partials ``None`` without ``using_partials``)."""
    wav = np.asarray(wav, dtype=np.float64)
    if not using_partials:
        return reference_network(state, reference_mel(wav)[None])[0], None, None
    wav_slices, mel_slices = reference_slices(len(wav))
    if wav_slices[-1][1] >= len(wav):
        wav = np.concatenate([wav, np.zeros(wav_slices[-1][1] - len(wav))])
    mel = reference_mel(wav)
    partials = reference_network(state, np.stack([mel[a:b] for a, b in mel_slices]))
    mean = partials.mean(axis=0)
    return mean / np.sqrt(np.sum(mean * mean)), partials, wav_slices


# -- checkpoints ----------------------------------------------------------------------------------------------
def write_random_checkpoints(tmp_path: Path, hidden: int = 24, layers: int = 2, embedding: int = 16, seed: int = 3):
    """Random encoder weights (40 mel channels) in both upstream formats: RTVC's ``encoder.pt`` (zip,
    ``{"model_state", "step"}``) and Resemblyzer's ``pretrained.pt`` (torch's legacy stream with an optimizer
    state). Needs torch (the writer only). Returns ``{name: path}``."""
    import torch

    g = torch.Generator().manual_seed(seed)
    lstm = torch.nn.LSTM(40, hidden, layers, batch_first=True)
    state = {k: torch.randn(v.shape, generator=g) * 0.3 for k, v in lstm.state_dict().items()}
    state = {f"lstm.{k}": v for k, v in state.items()}
    state["linear.weight"] = torch.randn(embedding, hidden, generator=g) * 0.5
    state["linear.bias"] = torch.rand(embedding, generator=g) * 0.2
    state["similarity_weight"] = torch.tensor([10.0])
    state["similarity_bias"] = torch.tensor([-5.0])
    rtvc = Path(tmp_path) / "encoder.pt"
    torch.save({"model_state": state, "step": 1234}, rtvc)
    resemblyzer = Path(tmp_path) / "pretrained.pt"
    optimizer_state = {"state": {0: {"exp_avg": torch.zeros(3), "step": 5}},
                       "param_groups": [{"lr": 1e-4, "betas": (0.9, 0.999), "params": [0]}]}
    torch.save({"step": 1234, "model_state": state, "optimizer_state": optimizer_state}, resemblyzer,
               _use_new_zipfile_serialization=False)
    return {"rtvc_zip": rtvc, "resemblyzer_legacy": resemblyzer}
