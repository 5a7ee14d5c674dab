"""Torch ``SpeakerEncoder``: the GE2E speaker encoder of Real-Time-Voice-Cloning, vectorised, safe loading."""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import clip_grad_norm_

from speechblocks.speaker_encoder import (
    check_speaker_encoder_arguments,
    encoder_checkpoint_state,
    partial_windows,
)
from speechblocks.speaker_encoder import ge2e_eer as _ge2e_eer_numpy
from speechblocks.state_dict import one_line

from ._state_dict import CheckedLoadStateDict, check_module_state_dict, safe_torch_load
from ._validation import check_float_tensor
from .zoneout_lstm_cell import lstm_from_gates

__all__ = ["SpeakerEncoder", "partial_windows", "ge2e_eer"]


def ge2e_eer(sim_matrix: torch.Tensor) -> float:
    """Equal error rate of a GE2E similarity matrix, as RTVC computes it.

    Labels are the flattened one-hot speaker identities, scores the flattened (scaled) similarity
    matrix; ``sklearn.metrics.roc_curve`` gives the ROC, and ``scipy.optimize.brentq`` finds where
    ``1 - fpr = tpr`` on its linear interpolation (``scipy.interpolate.interp1d``). scikit-learn and
    scipy are imported here only.

    Args:
        sim_matrix: ``(speakers, utterances, speakers)`` or ``(speakers * utterances, speakers)``.

    Returns:
        the EER as a float (:func:`speechblocks.speaker_encoder.ge2e_eer` of the scores).
    """
    return _ge2e_eer_numpy(sim_matrix.detach().cpu().numpy())


class SpeakerEncoder(CheckedLoadStateDict, nn.Module):
    """GE2E speaker encoder (Wan et al., 2018) as in Real-Time-Voice-Cloning, with upstream state-dict keys.

    Non-finite inputs: NaN and inf propagate as in the original PyTorch module (no check, no device sync).

    A ``model_num_layers``-layer LSTM over mel frames; the last layer's final hidden state goes through
    ``linear`` + ReLU and is L2-normalised (``e / (||e|| + 1e-5)``). ``similarity_matrix`` and ``loss``
    implement GE2E's softmax loss with inclusive centroids for other speakers and exclusive centroids for
    the utterance's own speaker, scaled by ``similarity_weight`` (init 10) and ``similarity_bias`` (init -5);
    both are vectorised (no loop over speakers, no numpy; the centroid dot products are one matmul
    accumulated in float64). Keys: ``lstm.*``, ``linear.*``,
    ``similarity_weight``, ``similarity_bias``: an RTVC ``encoder.pt`` loads with :meth:`from_checkpoint`.

    ``DistributedDataParallel``: the GE2E loss compares every utterance with every speaker's centroid, so it
    needs the whole global batch. Each rank embeds its share of the utterances (its speakers, or its
    utterances of every speaker) through the DDP wrapper, gathers the embeddings with
    :func:`torch_layers.distributed.gather_embeddings` (gradients flow back to each rank's share), and calls
    ``ddp.module.loss`` on the gathered ``(speakers, utterances, embedding)`` tensor: every rank computes the
    global batch's loss and EER, its gradient is ``world_size`` times its share, and DDP's average equals the
    single-process gradient (``similarity_weight`` / ``similarity_bias``, used outside ``forward``, get their
    gradients through the same backward and DDP averages them too). Then ``ddp.module.do_gradient_ops()``: the
    gradients are already averaged over the ranks, identical everywhere, so its 0.01 scaling and global-norm
    clipping act on the global gradient exactly as in one process (call it after ``backward``, never before
    DDP's reduction, i.e. not inside ``no_sync()``). Computing the loss on each rank's own speakers instead would
    contrast each utterance with a subset of the speakers only: another loss.

    Export (tested by ``run_torch_module_test``): under ``torch.export`` the LSTM runs as one ``scan`` over the frames
    per layer (``torch.compiler.is_exporting()``; the same ``nn.LSTM`` maths and parameters), so ``torch.export`` and
    ONNX (``torch.onnx.export(dynamo=True)``) keep batch and frames dynamic, within 1e-5 of eager at other sizes than
    the export's; an exported program is for inference (no gradient through the LSTM). Eager, TorchScript and
    ``torch.compile`` (which runs without recompiling per length) use ``nn.LSTM`` itself.

    Args:
        mel_n_channels: mel channels per frame.
        model_hidden_size: LSTM units.
        model_num_layers: LSTM layers.
        model_embedding_size: embedding size.
        device: factory keyword.
        dtype: factory keyword.

    Example:
        >>> enc = SpeakerEncoder(mel_n_channels=40).eval()
        >>> enc(torch.randn(3, 50, 40)).shape
        torch.Size([3, 256])
    """

    def __init__(self, mel_n_channels: int = 40, model_hidden_size: int = 256, model_num_layers: int = 3,
                 model_embedding_size: int = 256, device=None, dtype=None):
        super().__init__()
        check_speaker_encoder_arguments(mel_n_channels, model_hidden_size, model_num_layers, model_embedding_size)
        self.mel_n_channels = int(mel_n_channels)
        self.model_hidden_size = int(model_hidden_size)
        self.model_num_layers = int(model_num_layers)
        self.model_embedding_size = int(model_embedding_size)
        f = dict(device=device, dtype=dtype)
        self.lstm = nn.LSTM(self.mel_n_channels, self.model_hidden_size, self.model_num_layers, batch_first=True, **f)
        self.linear = nn.Linear(self.model_hidden_size, self.model_embedding_size, **f)
        self.relu = nn.ReLU()
        self.similarity_weight = nn.Parameter(torch.full((1,), 10.0, **f))
        self.similarity_bias = nn.Parameter(torch.full((1,), -5.0, **f))
        self._shape_doc = f"(batch, frames, {self.mel_n_channels})"

    # -- embeddings ---------------------------------------------------------------------------
    def forward(self, utterances: torch.Tensor,
                hidden_init: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        """
        Args:
            utterances: mel frames ``(batch, frames, mel_n_channels)``.
            hidden_init: optional initial LSTM state ``(h0, c0)``, each ``(model_num_layers, batch,
                model_hidden_size)``; zeros when omitted.

        Returns:
            L2-normalised embeddings ``(batch, model_embedding_size)``.
        """
        check_float_tensor(utterances, "utterances", "SpeakerEncoder", 3, self.mel_n_channels, self._shape_doc)
        if utterances.shape[1] < 1:
            raise ValueError("SpeakerEncoder: argument `utterances` needs at least one frame, expected shape "
                             + self._shape_doc + "; got shape " + str(list(utterances.shape)) + ".")
        if hidden_init is not None:
            want = [self.model_num_layers, utterances.shape[0], self.model_hidden_size]
            for part in hidden_init:
                if list(part.shape) != want:
                    raise ValueError("SpeakerEncoder: argument `hidden_init` must hold two tensors of shape "
                                     "(model_num_layers, batch, model_hidden_size) = " + str(want)
                                     + "; got shape " + str(list(part.shape)) + ".")
        if torch.jit.is_scripting():
            _, (hidden, _) = self.lstm(utterances, hidden_init)
        else:
            hidden = self._lstm_hidden(utterances, hidden_init)
        embeds_raw = self.relu(self.linear(hidden[-1]))
        return embeds_raw / (torch.linalg.vector_norm(embeds_raw, dim=1, keepdim=True) + 1e-5)

    @torch.jit.unused
    def _lstm_hidden(self, utterances: torch.Tensor,
                     hidden_init: Optional[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """The LSTM's hidden states ``(layers, batch, hidden)``; under CPU autocast in the parameters' dtype:
        autocast runs ``nn.LSTM`` in a lower precision that oneDNN cannot build on CPUs without native
        bfloat16/float16 (``RuntimeError: could not create a primitive descriptor for the LSTM``)."""
        if not torch.is_autocast_enabled("cpu"):
            return self._run_lstm(utterances, hidden_init)
        dtype = self.linear.weight.dtype
        if hidden_init is not None:
            hidden_init = (hidden_init[0].to(dtype), hidden_init[1].to(dtype))
        with torch.autocast("cpu", enabled=False):
            return self._run_lstm(utterances.to(dtype), hidden_init)

    @torch.jit.unused
    def _run_lstm(self, utterances: torch.Tensor,
                  hidden_init: Optional[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """``nn.LSTM``'s final hidden states ``(layers, batch, hidden)``; under ``torch.export`` the same LSTM as one
        ``scan`` over the frames per layer (``torch.export`` would unroll ``nn.LSTM``'s loop, fixing the frames)."""
        if not torch.compiler.is_exporting():
            return self.lstm(utterances, hidden_init)[1][0]
        from torch._higher_order_ops.scan import scan

        batch, n = utterances.shape[0], self.model_hidden_size
        seq = utterances.transpose(0, 1)  # (frames, batch, channels)
        hidden = []
        for k in range(self.model_num_layers):
            # an exported program is for inference: a scan whose inputs require grad fails torch 2.13's ONNX exporter
            # (its decompositions run the scan through autograd) when torch.onnx.export runs with grad on
            w_ih, w_hh = getattr(self.lstm, f"weight_ih_l{k}").detach(), getattr(self.lstm, f"weight_hh_l{k}").detach()
            b_ih, b_hh = getattr(self.lstm, f"bias_ih_l{k}").detach(), getattr(self.lstm, f"bias_hh_l{k}").detach()
            gx = F.linear(seq, w_ih, b_ih) + b_hh  # (frames, batch, 4n), torch gate order i, f, g, o
            if hidden_init is None:
                c0 = seq.new_zeros(batch, n)
                h0 = torch.zeros_like(c0)
            else:
                h0, c0 = hidden_init[0][k], hidden_init[1][k]

            def step(carry: list[torch.Tensor], gx_t: torch.Tensor, w_hh=w_hh):
                c, h = lstm_from_gates(torch.addmm(gx_t, carry[1], w_hh.t()), carry[0])
                return [c, h], h.clone()  # (scan refuses an output aliasing the carry)

            (_, h_last), seq = scan(step, [c0, h0], gx)
            hidden.append(h_last)
        return torch.stack(hidden, 0)

    @torch.jit.unused
    def embed_utterance(self, mel: torch.Tensor, partials_n_frames: int = 160, overlap: float = 0.5,
                        min_coverage: float = 0.75, pad_value: float = 0.0,
                        return_partials: bool = False):
        """Embeds a whole utterance from its mel spectrogram, RTVC style.

        The mel frames are cut into :func:`partial_windows` (160-frame windows every 80 frames; the last
        window is padded with ``pad_value`` frames and dropped when fewer than 75 % of its frames are
        real, unless it is the only one), the windows are embedded in one batch, and the mean of the
        partial embeddings is L2-normalised (``mean / ||mean||``, as RTVC).

        Args:
            mel: ``(frames, mel_n_channels)``.
            partials_n_frames: window length in frames.
            overlap: overlap of consecutive windows in [0, 1).
            min_coverage: minimum real-frame fraction of the last window.
            pad_value: value of the padding frames.
            return_partials: also return the partial embeddings and the windows.

        Returns:
            ``(model_embedding_size,)`` embedding; with ``return_partials``, ``(embedding, partials
            (n_windows, model_embedding_size), windows)``.
        """
        check_float_tensor(mel, "mel", "SpeakerEncoder.embed_utterance", 2, self.mel_n_channels,
                           f"(frames, {self.mel_n_channels})")
        n_frames = int(mel.shape[0])
        if n_frames < 1:
            raise ValueError("SpeakerEncoder.embed_utterance: argument `mel` needs at least one frame, expected shape "
                             f"(frames, {self.mel_n_channels}); got shape {list(mel.shape)}.")
        windows = partial_windows(n_frames, partials_n_frames, overlap, min_coverage)
        need = windows[-1][1]
        if need > n_frames:
            mel = F.pad(mel, (0, 0, 0, need - n_frames), value=pad_value)
        frames = torch.stack([mel[a:b] for a, b in windows])
        partials = self(frames)
        mean = partials.mean(dim=0)
        embed = mean / torch.linalg.vector_norm(mean)
        if return_partials:
            return embed, partials, windows
        return embed

    @torch.jit.unused
    def embed_wav(self, wav_or_path: str | os.PathLike | np.ndarray, source_sr: Optional[int] = None,
                  using_partials: bool = True, return_partials: bool = False, preprocess: bool = True,
                  partial_utterance_n_frames: int = 160, min_pad_coverage: float = 0.75, overlap: float = 0.5):
        """Embeds a recording, as RTVC's ``embed_utterance(preprocess_wav(wav_or_path, source_sr))``.

        :func:`speechblocks.audio.speaker.embed_speaker_wav` with this module as the network (run without
        gradients, on its device and in its dtype): preprocessing (16 kHz, -30 dBFS, long silences cut), the
        waveform zero-padded to the last 1.6 s partial's end, its power mel, the partials embedded in one batch,
        the mean of the partial embeddings L2-normalised. Needs ``mel_n_channels == 40``.

        Args:
            wav_or_path: an audio file (what soundfile reads) or a float waveform ``(samples,)``.
            source_sr: the waveform's sampling rate (``None``: 16 kHz); ignored for a file.
            using_partials: average 1.6 s partials (default) or embed the whole mel at once.
            return_partials: also return the partial embeddings and the waveform slices.
            preprocess: ``False``: ``wav_or_path`` is a waveform already preprocessed at 16 kHz.
            partial_utterance_n_frames: frames of a partial utterance.
            min_pad_coverage: minimum covered fraction of the last partial.
            overlap: overlap of consecutive partials.

        Returns:
            float32 **numpy** embedding ``(model_embedding_size,)`` (as the original; the same in the Keras twin);
            with ``return_partials``, ``(embedding, partials (n_partials, model_embedding_size), wav_slices)``
            (``(embedding, None, None)`` without ``using_partials``).

        Raises:
            ValueError: one line naming the file or argument (not audio, empty, silent, shorter than one mel window,
                NaN, a ``source_sr`` that is no positive int, no speech found), or ``mel_n_channels != 40``.
        """
        from speechblocks.audio.speaker import SPEAKER_N_MELS, embed_speaker_wav

        if self.mel_n_channels != SPEAKER_N_MELS:
            raise ValueError(f"SpeakerEncoder.embed_wav: needs mel_n_channels == {SPEAKER_N_MELS} (the encoder's "
                             f"mel); this encoder has {self.mel_n_channels}.")
        weight = self.linear.weight

        def embed_frames(frames: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                x = torch.from_numpy(frames).to(device=weight.device, dtype=weight.dtype)
                return self(x).float().cpu().numpy()

        return embed_speaker_wav(embed_frames, wav_or_path, source_sr, using_partials, return_partials, preprocess,
                                 partial_utterance_n_frames, min_pad_coverage, overlap)

    # -- GE2E loss ----------------------------------------------------------------------------
    def _check_embeds(self, embeds: torch.Tensor) -> None:
        check_float_tensor(embeds, "embeds", "SpeakerEncoder", 3, -1,
                           "(speakers_per_batch, utterances_per_speaker, embedding_size)")
        if embeds.shape[0] < 1 or embeds.shape[1] < 2:
            raise ValueError("SpeakerEncoder: argument `embeds` needs >= 1 speaker and >= 2 utterances per speaker "
                             "(exclusive centroids), expected shape (speakers_per_batch, utterances_per_speaker, "
                             "embedding_size); got shape " + str(list(embeds.shape)) + ".")

    @torch.jit.unused
    def similarity_matrix(self, embeds: torch.Tensor) -> torch.Tensor:
        """GE2E similarity matrix (section 2.1), scaled: ``w * cos + b``.

        ``sim[j, i, k]`` is the cosine between utterance ``i`` of speaker ``j`` and the centroid of speaker
        ``k``: the inclusive centroid (mean of all ``k``'s utterances) for ``k != j``, the exclusive one
        (mean of ``j``'s other utterances) for ``k == j``; centroids normalised with ``+1e-5``.

        Args:
            embeds: ``(speakers_per_batch, utterances_per_speaker, embedding_size)``.

        Returns:
            ``(speakers_per_batch, utterances_per_speaker, speakers_per_batch)``.
        """
        self._check_embeds(embeds)
        n_spk, n_utt = embeds.shape[0], embeds.shape[1]
        incl = embeds.mean(dim=1)
        incl = incl / (torch.linalg.vector_norm(incl, dim=1, keepdim=True) + 1e-5)
        excl = (embeds.sum(dim=1, keepdim=True) - embeds) / (n_utt - 1)
        excl = excl / (torch.linalg.vector_norm(excl, dim=2, keepdim=True) + 1e-5)
        # (S, U, S) against every inclusive centroid: one matmul, accumulated in float64 (tiny at GE2E sizes)
        # so each entry is the correctly rounded dot product, within half an ulp of upstream's per-speaker sums
        acc = torch.float64 if embeds.device.type in ("cpu", "cuda") else embeds.dtype
        cross = torch.matmul(embeds.to(acc), incl.to(acc).t()).to(embeds.dtype)
        own = (embeds * excl).sum(dim=2)  # (S, U) against the own exclusive centroid
        eye = torch.eye(n_spk, dtype=torch.bool, device=embeds.device).unsqueeze(1)  # (S, 1, S)
        sim = torch.where(eye, own.unsqueeze(2), cross)
        return sim * self.similarity_weight + self.similarity_bias

    @torch.jit.unused
    def loss(self, embeds: torch.Tensor, compute_eer: bool = True):
        """GE2E softmax loss (mean cross-entropy of each utterance against its speaker) and the EER.

        Args:
            embeds: ``(speakers_per_batch, utterances_per_speaker, embedding_size)``.
            compute_eer: compute the equal error rate (scikit-learn + scipy, not differentiable).

        Returns:
            ``(loss, eer)``: scalar loss tensor; EER float, or ``None`` when ``compute_eer`` is False.
        """
        sim = self.similarity_matrix(embeds)
        n_spk, n_utt = sim.shape[0], sim.shape[1]
        logits = sim.reshape(n_spk * n_utt, n_spk)
        target = torch.arange(n_spk, device=sim.device).repeat_interleave(n_utt)
        loss = F.cross_entropy(logits, target)
        eer: Optional[float] = None
        if compute_eer:
            if n_spk < 2:
                raise ValueError("SpeakerEncoder.loss: the EER needs >= 2 speakers in `embeds`, expected shape "
                                 "(speakers_per_batch, utterances_per_speaker, embedding_size); got shape "
                                 + str(list(embeds.shape)) + ". Pass compute_eer=False.")
            eer = ge2e_eer(logits)
        return loss, eer

    @torch.jit.unused
    def do_gradient_ops(self, max_norm: float = 3.0) -> None:
        """GE2E training step helper: scales the gradients of ``similarity_weight`` and ``similarity_bias``
        by 0.01, then clips the gradients of all parameters to a global L2 norm of ``max_norm`` (3).

        Under ``DistributedDataParallel`` call it on ``ddp.module`` after ``backward()`` (the gradients are then
        DDP's average, the same on every rank), before ``optimizer.step()``: every rank scales and clips the
        global gradient identically, as one process would."""
        for p in (self.similarity_weight, self.similarity_bias):
            if p.grad is not None:
                p.grad.mul_(0.01)
        clip_grad_norm_(self.parameters(), max_norm, norm_type=2)

    # -- checkpoints --------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, map_location="cpu", strict: bool = True, device=None,
                        dtype=None) -> SpeakerEncoder:
        """Builds an encoder from an upstream checkpoint, sizes inferred from the weights.

        Reads with ``torch.load(..., weights_only=True)``: tensors, numbers, strings and containers only,
        never arbitrary objects. Accepts a bare state dict or RTVC's ``encoder.pt`` / Resemblyzer's ``pretrained.pt``
        (``{"model_state": state_dict, "step": int, "optimizer_state": ...}``; zip or torch's legacy format; the
        optimizer state is ignored).

        Args:
            path: checkpoint file.
            map_location: as ``torch.load``.
            strict: as ``load_state_dict``.
            device: factory keyword of the new module.
            dtype: factory keyword of the new module.

        Returns:
            the module with the checkpoint's weights.

        Raises:
            FileNotFoundError: no such file.
            ValueError: one line naming the file: a damaged file, a pickle of anything else than tensors and plain
                data (nothing of it runs), no encoder state dict, or one with wrong, missing, extra or mis-shaped
                keys (the problems listed on that line).
        """
        what = "SpeakerEncoder.from_checkpoint: checkpoint"
        data = safe_torch_load(path, map_location, what)
        state, sizes = encoder_checkpoint_state(data, os.fspath(path), what)
        try:  # checked on the meta device first: sizes a damaged file claims allocate nothing
            check_module_state_dict(cls(**sizes, device="meta"), state, strict)
            module = cls(**sizes, device=device, dtype=dtype)
            module.load_state_dict(state, strict=strict)
        except ValueError as e:
            raise ValueError(f"{what} {os.fspath(path)!r} does not fit the encoder its shapes describe: "
                             f"{one_line(getattr(e, 'problems', [str(e)]))}") from None
        return module

    def extra_repr(self) -> str:
        return (f"mel_n_channels={self.mel_n_channels}, model_hidden_size={self.model_hidden_size}, "
                f"model_num_layers={self.model_num_layers}, model_embedding_size={self.model_embedding_size}")
