"""The Tacotron-1 family's wav path: a predicted linear spectrogram -> the synthesizer's waveform.

keithito/tacotron's and mimic2's ``inv_spectrogram``: ``S = db_to_amp(denormalize(linear) + ref_level_db)``
(``[0, 1]`` clipped, ``min_level_db`` -100, ``ref_level_db`` 20), Griffin-Lim of ``S ** power`` (1.5; 60 iterations
for keithito, 50 for mimic2) with librosa's STFT of its pinned version 0.5.1 (reflect centre padding), then
``inv_preemphasis`` (keithito only: mimic2 has no pre-emphasis), and the synthesizers' cut at
:func:`~speechblocks.audio.find_endpoint`.

librosa 0.5.1's ``stft`` returned the complex conjugate of today's (``fft(...).conj()``, "to match phase from DPWE
code") and its ``istft`` conjugated back, so its Griffin-Lim started from ``conj(angles)`` in today's convention:
``angles=`` here are the original's draw ``np.exp(2j * np.pi * np.random.rand(num_freq, frames))`` as it handed
them to librosa 0.5.1, and the waveform equals the original's for that draw. The original computed its STFTs in
complex64 (librosa 0.5.1's default ``dtype``); this runs in float64.

Not reproduced: the synthesizers' TensorFlow Griffin-Lim (``inv_spectrogram_tensorflow``: zero initial phases,
``tf.contrib.signal`` STFTs without centring or window-sum normalisation), which their ``Synthesizer`` runs;
the numpy ``inv_spectrogram`` is what their training-time audio summaries (``train.py``) and ``eval`` use.
"""
from __future__ import annotations

import numpy as np

from .endpoint import find_endpoint
from .griffin_lim import _initial_angles, inv_linear_spectrogram
from .params import as_audio_hparams

__all__ = ["tacotron1_wav"]


def tacotron1_wav(linear, hparams="keithito", *, n_iter: int | None = None, angles=None, seed: int | None = None,
                  trim: bool = True) -> np.ndarray:
    """A Tacotron-1 linear spectrogram to the waveform, as the original's ``inv_spectrogram`` and
    ``wav[:find_endpoint(wav)]``.

    Args:
        linear: ``(frames, num_freq)`` normalised linear spectrogram (``linear_outputs[0]`` of the model, or a
            preprocessed ``ljspeech-spec-*.npy``).
        hparams: ``"keithito"``, ``"mimic2"``, a mapping of original names or an
            :class:`~speechblocks.audio.AudioHParams`.
        n_iter: Griffin-Lim iterations; default ``griffin_lim_iters``.
        angles: the original's initial phases ``(num_freq, frames)`` complex, as drawn by
            ``np.exp(2j * np.pi * np.random.rand(num_freq, frames))`` and given to librosa 0.5.1 (see the module
            docstring); default a fresh draw.
        seed: with ``angles=None``, draws ``np.random.default_rng(seed).random((num_freq, frames))`` instead of
            the global ``np.random.rand``.
        trim: cut at :func:`~speechblocks.audio.find_endpoint` (default thresholds), as the synthesizers do.

    Returns:
        np.ndarray: float32 ``(samples,)``: ``hop_size * (frames - 1)`` samples before the cut.

    Raises:
        ValueError: naming ``linear`` when it is not ``(frames, num_freq)`` or holds NaN/inf; naming ``angles``
            when its shape is not ``(num_freq, frames)``.
    """
    hp = as_audio_hparams(hparams)
    a = np.asarray(linear)
    if a.ndim != 2 or a.shape[1] != hp.num_freq:
        raise ValueError(f"tacotron1_wav: `linear` must have shape (frames, num_freq) = (frames, {hp.num_freq}); "
                         f"got {a.shape}.")
    phases = np.conj(_initial_angles(angles, seed, (hp.num_freq, a.shape[0])))
    wav = inv_linear_spectrogram(a, hp, n_iter, angles=phases)
    return wav[:find_endpoint(wav, hp)] if trim else wav
