"""Torch ``Tacotron1``: the whole keithito/tacotron and MycroftAI/mimic2 model (embedding, encoder pre-net and CBHG,
attention decoder, post CBHG, linear projection), with TF1 weight exchange."""
from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechblocks.migration.migrated_file import MigratedFileError, file_error
from speechblocks.state_dict import StateDictError
from speechblocks.tacotron1_hparams import Tacotron1HParams
from speechblocks.tacotron1_model import (
    NOISE_MASK_KEYS,
    PRENET_DROP_RATE,
    TACOTRON1_SCOPE,
    fit_tacotron1_hparams,
    resolve_tacotron1_model,
)
from speechblocks.tacotron1_schema import canonical_names

from ._functional import tf1_dropout
from ._migrated_model import read_payload, state_dict_entry
from ._state_dict import check_module_state_dict
from .cbhg import CBHG
from .location_sensitive_attention import check_memory_lengths
from .prenet import Prenet
from .tacotron1_decoder import Tacotron1Decoder
from .tf1_exchange import TF1Variable, TF1WeightsMixin, dense_from_tf1, dense_to_tf1, tf1_training_gradients

__all__ = ["Tacotron1"]

_BLOCK = "Tacotron1"


def _cbhg(input_size: int, bank: int, projections: list[int], depth: int, scope: str, factory: dict) -> CBHG:
    """keithito's ``cbhg``: 128-channel bank, pool 2, kernel-3 projections, 4 highways and a BiGRU of depth // 2,
    ReLU before batch norm."""
    half = depth // 2
    return CBHG(input_size, bank, 128, 2, projections, 3, 4, half, half, tf1_scope=scope, bn_position="after",
                tf1_naming="keithito", **factory)


class Tacotron1(TF1WeightsMixin, nn.Module):
    """Tacotron (Wang et al., 2017) as keithito/tacotron and MycroftAI/mimic2 build it in TF 1.x, from their hparams.

    Non-finite inputs: NaN and inf propagate as in the TF1 graph (no check, no device sync).

    ``embedding`` -> encoder :class:`Prenet` (``prenet``; relu dense + dropout 0.5 in ``train()`` only) -> encoder
    :class:`CBHG` (``encoder_cbhg``: K = 16, projections ``[128, prenet_depths[-1]]``, BiGRU of
    ``encoder_depth // 2`` with the input lengths) -> memory -> :class:`Tacotron1Decoder` (no memory mask unless
    ``mask_memory``) -> ``mel_outputs`` (the frames reshaped to ``(batch, steps * r, num_mels)``) -> post
    :class:`CBHG` (``post_cbhg``: K = 8, projections ``[256, num_mels]``, no lengths) -> ``dense`` to
    ``num_freq``. ``train()``: pre-net dropout, batch-norm batch statistics (moving statistics updated);
    ``eval()``: neither.

    TF1 exchange: :meth:`tf1_weights` / :meth:`load_tf1_weights` use exactly the names of
    :func:`speechblocks.tacotron1_schema.tf1_variable_shapes` (relative to ``model/inference``, TF1 layouts).

    Args:
        hparams: anything :func:`speechblocks.resolve_tacotron1_hparams` takes (a preset ``"keithito"`` /
            ``"mimic2"``, a mapping of original names, a ``Tacotron1HParams``).
        layout: ``"keithito-20170720"``, ``"keithito-20180906"`` or ``"mimic2"``; ``None``: keithito-20180906 for
            keithito's variant, mimic2 for mimic2's. A layout whose attention contradicts the hparams: ValueError.
        mask_memory: mask the attention scores past the input lengths (not the originals; default False).
        device: factory keyword.
        dtype: factory keyword.
        **overrides: hparams by original name.

    Example:
        >>> model = Tacotron1("keithito", max_iters=3).eval()
        >>> out = model(torch.randint(0, 149, (1, 12)))
        >>> out["mel_outputs"].shape[2], out["linear_outputs"].shape[2]
        (80, 1025)
    """

    __jit_ignored_attributes__ = ["hparams"]

    def __init__(self, hparams="keithito", layout: Optional[str] = None, *, mask_memory: bool = False, device=None,
                 dtype=None, **overrides):
        super().__init__()
        hp, layout = resolve_tacotron1_model(hparams, layout, **overrides)
        self.hparams, self.layout, self.tf1_scope = hp, layout, TACOTRON1_SCOPE
        factory = {"device": device, "dtype": dtype}
        pre = list(hp.prenet_depths)
        # given weight: nn.Embedding's own normal_ init would be thrown away (and on the meta device imports dynamo)
        self.embedding = nn.Embedding(hp.n_symbols, hp.embed_depth, _weight=torch.empty(hp.n_symbols, hp.embed_depth,
                                                                                        **factory))
        if self.embedding.weight.device.type != "meta":
            nn.init.trunc_normal_(self.embedding.weight, std=0.5, a=-1.0, b=1.0)  # truncated_normal(stddev=0.5)
        self.encoder_prenet = Prenet(hp.embed_depth, pre, PRENET_DROP_RATE, "relu", tf1_scope="prenet",
                                     dropout="training", **factory)
        self.encoder_cbhg = _cbhg(pre[-1], 16, [128, pre[-1]], hp.encoder_depth, "encoder_cbhg", factory)
        self.decoder = Tacotron1Decoder(hp, layout, mask_memory=mask_memory, **factory)
        self.post_cbhg = _cbhg(hp.num_mels, 8, [256, hp.num_mels], hp.postnet_depth, "post_cbhg", factory)
        self.linear_projection = nn.Linear(2 * (hp.postnet_depth // 2), hp.num_freq, **factory)
        nn.init.xavier_uniform_(self.linear_projection.weight)
        nn.init.zeros_(self.linear_projection.bias)

    @property
    def mask_memory(self) -> bool:
        return self.decoder.mask_memory

    def forward(self, inputs: Tensor, input_lengths: Optional[Tensor] = None, mel_targets: Optional[Tensor] = None,
                max_iters: Optional[int] = None, noise_masks: Optional[dict] = None) -> dict[str, Tensor]:
        """
        Args:
            inputs: ``(batch, T_in)`` integer symbol ids in ``[0, n_symbols)``.
            input_lengths: ``(batch,)`` integer lengths in ``[1, T_in]``; ``None``: every row full length.
            mel_targets: ``(batch, T_out >= r, num_mels)``: teacher forcing (``min(T_out // r, max_iters)`` steps);
                ``None``: free running (exact-zero stop, at most ``max_iters`` steps).
            max_iters: step cap ``>= 1`` (default ``hparams.max_iters``; it caps teacher forcing too).
            noise_masks: optional 0/1 keep-masks replacing the pre-nets' dropout (in any mode): ``"encoder_prenet"``
                one ``(batch, T_in, prenet_depths[i])`` per layer, ``"decoder_prenet"`` one ``(batch, steps,
                prenet_depths[i])`` per layer (free running: at least ``max_iters`` steps); ``None`` entries and
                absent keys keep the random dropout (training) or none (eval).

        Returns:
            dict: ``mel_outputs`` ``(batch, steps * r, num_mels)``, ``linear_outputs`` ``(batch, steps * r,
            num_freq)``, ``alignments`` ``(batch, T_in, steps)``.
        """
        input_lengths = self._check_inputs(inputs, input_lengths, noise_masks)
        embedded = self.embedding(inputs)
        x = self._encoder_prenet(embedded, None if noise_masks is None else noise_masks.get("encoder_prenet"))
        memory = self.encoder_cbhg(x, input_lengths)
        frames, alignments = self.decoder(memory, input_lengths, mel_targets, max_iters, noise_masks)
        mel = frames.reshape(frames.shape[0], -1, self.hparams.num_mels)
        linear = self.linear_projection(self.post_cbhg(mel))
        return {"mel_outputs": mel, "linear_outputs": linear, "alignments": alignments}

    def _check_inputs(self, inputs: Tensor, input_lengths: Optional[Tensor], noise_masks: Optional[dict]) -> Tensor:
        """Checks the ids, lengths and noise-mask keys (ValueErrors naming them); returns the lengths."""
        n = self.hparams.n_symbols
        if not isinstance(inputs, Tensor) or inputs.is_floating_point() or inputs.dtype == torch.bool \
                or inputs.dim() != 2 or inputs.shape[1] < 1:
            got = f"dtype {inputs.dtype} and shape {list(inputs.shape)}" if isinstance(inputs, Tensor) else \
                type(inputs).__name__
            raise ValueError(f"{_BLOCK}: argument `inputs` must be an integer tensor of symbol ids of shape (batch, "
                             f"T_in >= 1); got {got}.")
        if inputs.numel() > 0:
            lo, hi = int(inputs.min()), int(inputs.max())
            if lo < 0 or hi >= n:
                raise ValueError(f"{_BLOCK}: argument `inputs` (batch, T_in) must hold symbol ids in [0, n_symbols="
                                 f"{n}); got ids in [{lo}, {hi}].")
        if noise_masks is not None:
            unknown = sorted(set(noise_masks) - set(NOISE_MASK_KEYS))
            if unknown:
                raise ValueError(f"{_BLOCK}: argument `noise_masks` takes the keys {list(NOISE_MASK_KEYS)}; got "
                                 f"unknown keys {unknown}.")
        if input_lengths is None:
            return torch.full((inputs.shape[0],), inputs.shape[1], dtype=torch.long, device=inputs.device)
        check_memory_lengths(input_lengths, "input_lengths", _BLOCK, inputs.shape[0], inputs.shape[1])
        return input_lengths.to(inputs.device)

    def _encoder_prenet(self, x: Tensor, masks: Optional[list]) -> Tensor:
        """The encoder pre-net with injected keep-masks (``None`` entries: random dropout in training only)."""
        sizes = self.encoder_prenet.layers_sizes
        if masks is None:
            return self.encoder_prenet(x)
        if not isinstance(masks, (list, tuple)) or len(masks) != len(sizes):
            raise ValueError(f"{_BLOCK}: argument `noise_masks['encoder_prenet']` must be a list of {len(sizes)} "
                             "keep-masks, one per pre-net layer, each (batch, T_in, prenet_depths[i]).")
        for i, (layer, mask) in enumerate(zip(self.encoder_prenet.layers, masks)):
            x = torch.relu(F.linear(x, layer.weight, layer.bias))
            if mask is not None:
                expected = list(x.shape)
                if not isinstance(mask, Tensor) or list(mask.shape) != expected:
                    got = list(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__
                    raise ValueError(f"{_BLOCK}: argument `noise_masks['encoder_prenet'][{i}]` must have shape "
                                     f"(batch, T_in, {sizes[i]}) = {expected}; got {got}.")
                x = tf1_dropout(x, PRENET_DROP_RATE, mask.to(x.dtype))
            elif self.training:
                x = tf1_dropout(x, PRENET_DROP_RATE)
        return x

    # -- inference and loss ---------------------------------------------------------------------------------

    @torch.jit.unused
    def synthesize(self, inputs, input_lengths=None, max_iters: Optional[int] = None) -> dict[str, np.ndarray]:
        """Free-running synthesis: :meth:`forward` in ``eval()`` (no dropout, moving statistics) under
        ``torch.no_grad()``; the module's mode is restored afterwards.

        Args:
            inputs: ``(batch, T_in)`` integer symbol ids (tensor or array).
            input_lengths: ``(batch,)`` integer lengths (tensor or array); ``None``: full length.
            max_iters: step cap ``>= 1`` (default ``hparams.max_iters``).

        Returns:
            dict of numpy arrays: ``mel_outputs``, ``linear_outputs``, ``alignments`` (shapes as :meth:`forward`).
        """
        device = self.linear_projection.weight.device
        inputs = torch.as_tensor(np.asarray(inputs) if not isinstance(inputs, Tensor) else inputs, device=device)
        if input_lengths is not None and not isinstance(input_lengths, Tensor):
            input_lengths = torch.as_tensor(np.asarray(input_lengths), device=device)
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                out = self(inputs, input_lengths, None, max_iters)
        finally:
            self.train(was_training)
        return {k: v.detach().cpu().numpy() for k, v in out.items()}

    def loss(self, outputs: dict[str, Tensor], mel_targets: Tensor, linear_targets: Tensor) -> dict[str, Tensor]:
        """keithito's ``add_loss`` (no masking): ``mel_loss = mean|mel_targets - mel_outputs|``,
        ``linear_loss = 0.5 mean(l1) + 0.5 mean(l1[..., :n_priority_freq])``, ``loss`` their sum.

        Args:
            outputs: :meth:`forward`'s dict (``mel_outputs``, ``linear_outputs``).
            mel_targets: ``(batch, steps * r, num_mels)``, the shape of ``mel_outputs``.
            linear_targets: ``(batch, steps * r, num_freq)``, the shape of ``linear_outputs``.

        Returns:
            dict of scalar tensors ``mel_loss``, ``linear_loss``, ``loss``.
        """
        mel, linear = outputs["mel_outputs"], outputs["linear_outputs"]
        for name, target, out in (("mel_targets", mel_targets, mel), ("linear_targets", linear_targets, linear)):
            if not isinstance(target, Tensor) or target.shape != out.shape:
                got = list(target.shape) if isinstance(target, Tensor) else type(target).__name__
                raise ValueError(f"{_BLOCK}.loss: argument `{name}` must have the outputs' shape {list(out.shape)} "
                                 f"(batch, steps * r, channels); got {got}.")
        mel_loss = (mel_targets - mel).abs().mean()
        l1 = (linear_targets - linear).abs()
        linear_loss = 0.5 * l1.mean() + 0.5 * l1[:, :, :self.hparams.n_priority_freq].mean()
        return {"mel_loss": mel_loss, "linear_loss": linear_loss, "loss": mel_loss + linear_loss}

    @torch.jit.unused
    def tf1_loss_and_gradients(self, inputs: Tensor, input_lengths: Optional[Tensor], mel_targets: Tensor,
                               linear_targets: Tensor, noise_masks: Optional[dict] = None
                               ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """One training-mode teacher-forced pass with :meth:`loss` and autograd, as the TF1 graph's ``add_loss``
        and ``tf.gradients`` compute it. Mode, batch-norm moving statistics and ``.grad`` are left as they were.

        Args:
            inputs, input_lengths, noise_masks: as :meth:`forward`.
            mel_targets: ``(batch, T_out, num_mels)``, ``T_out`` a multiple of ``r`` (at most ``max_iters * r``).
            linear_targets: ``(batch, T_out, num_freq)``.

        Returns:
            ``(losses, gradients)``: ``{mel_loss, linear_loss, loss}`` as floats and ``{TF1 name relative to
            model/inference: gradient (numpy, TF1 layout)}`` of every trainable variable (zeros where unused).
        """
        variables = {k: v for k, v in self._tf1_variables().items() if isinstance(v.tensor, nn.Parameter)}
        return tf1_training_gradients(self, variables, lambda: self.loss(
            self(inputs, input_lengths, mel_targets, None, noise_masks), mel_targets, linear_targets))

    # -- TF1 exchange and files ----------------------------------------------------------------------------

    @torch.jit.unused
    def _tf1_variables(self) -> dict[str, TF1Variable]:
        out: dict[str, TF1Variable] = {"embedding": TF1Variable(self.embedding.weight)}
        for module in (self.encoder_prenet, self.encoder_cbhg, self.post_cbhg):
            out.update({f"{module.tf1_scope}/{k}": v for k, v in module._tf1_variables().items()})
        out.update(self.decoder._tf1_variables())  # already relative to model/inference
        out["dense/kernel"] = TF1Variable(self.linear_projection.weight, dense_to_tf1, dense_from_tf1)
        out["dense/bias"] = TF1Variable(self.linear_projection.bias)
        return out

    @classmethod
    def from_tf1_checkpoint(cls, path: str | os.PathLike, hparams=None, *, mask_memory: bool = False, device=None,
                            dtype=None, allow_nonfinite: bool = False, **overrides) -> Tacotron1:
        """Builds the model from a keithito/tacotron or mimic2 TF1 checkpoint (read in numpy: no TensorFlow).

        The layout and every size come from the variables under ``model/inference/``
        (:func:`speechblocks.tacotron1_schema.infer_layout_and_hparams`; TF < 1.2 ``weights``/``biases`` spellings
        accepted). ``hparams``: ``None`` (the checkpoint's, on its variant's preset), a preset name (its non-size
        values, the checkpoint's sizes), or a mapping / ``Tacotron1HParams`` taken as given; ``overrides`` apply
        last; the result must fit the checkpoint's shapes.

        Args:
            path: checkpoint prefix (``model.ckpt-1000``) or a directory with a ``checkpoint`` file.
            hparams: see above.
            mask_memory: as for :class:`Tacotron1`.
            device: factory keyword.
            dtype: factory keyword.
            allow_nonfinite: load NaN/inf values (with a warning) instead of raising.
            **overrides: hparams by original name (e.g. ``max_iters``).

        Returns:
            the model in ``eval()`` mode with every variable loaded.

        Raises:
            ValueError: no variable under ``model/inference/``, variables of no Tacotron-1 layout, or hparams that
                contradict the shapes (one message listing them). FileNotFoundError: no checkpoint at ``path``.
        """
        from speechblocks.tf1_checkpoint import read_tf1_weights

        source = f"checkpoint {os.fspath(path)!r}"
        raw = read_tf1_weights(path, TACOTRON1_SCOPE, allow_nonfinite=allow_nonfinite)
        if not raw:
            raise ValueError(f"{_BLOCK}.from_tf1_checkpoint: {source} holds no variable under {TACOTRON1_SCOPE!r}.")
        shapes, renamed = canonical_names({k: tuple(np.shape(v)) for k, v in raw.items()})
        weights = {k: raw[renamed.get(k, k)] for k in shapes}
        hp, layout = fit_tacotron1_hparams(shapes, hparams, overrides, source)
        model = cls(hp, layout, mask_memory=mask_memory, device=device, dtype=dtype)
        model.load_tf1_weights(weights)
        return model.eval()

    @classmethod
    def from_migrated(cls, path: str | os.PathLike, hparams=None, *, map_location: str | torch.device = "cpu",
                      mask_memory: bool = False, **overrides) -> Tacotron1:
        """The whole model from a torch file of ``speechblocks migrate --to torch``: ``torch.load(weights_only=True)``
        of ``{"speechblocks_format": "speechblocks.migrated.torch", "format_version": 2, "model": JSON
        {"class_name": "Tacotron1", "hparams": ..., "layout": ...}, "model_state_dict": ...}`` (zip checksums
        verified first). ``hparams`` replaces the stored hparams, ``overrides`` apply last (sizes must agree with
        the stored tensors).

        Returns:
            the model in ``eval()`` mode on ``map_location``.

        Raises:
            FileNotFoundError: no such file.
            MigratedFileError (a ``ValueError``): not a migrated torch file, a damaged file, not a Tacotron-1 model,
                or hparams that contradict the tensors (one line naming the file).
        """
        path = os.fspath(path)
        payload = read_payload(path, map_location)
        state = state_dict_entry(payload.get("model_state_dict"), path, "the whole model's state dict")
        stored, layout = _stored_model(payload.get("model"), path)
        try:
            check_module_state_dict(cls(stored, layout, device="meta"), state, True, _BLOCK)
        except StateDictError as e:
            raise file_error(path, [f"its state dict does not fit its stored hparams: {e.problems[0]}"]
                             + e.problems[1:]) from None
        hp = stored
        if hparams is not None or overrides:
            try:
                hp, layout = resolve_tacotron1_model(stored if hparams is None else hparams, layout, **overrides)
                model = cls(hp, layout, mask_memory=mask_memory, device="meta")
                check_module_state_dict(model, state, True, _BLOCK)
            except (ValueError, StateDictError) as e:
                raise file_error(path, [f"the hparams do not fit its tensors: {' '.join(str(e).split())}"]) from None
        model = cls(hp, layout, mask_memory=mask_memory)
        model.load_state_dict(state, strict=True)
        return model.to(map_location).eval()

    def extra_repr(self) -> str:
        hp = self.hparams
        return (f"variant={hp.variant!r}, layout={self.layout!r}, n_symbols={hp.n_symbols}, num_mels={hp.num_mels}, "
                f"outputs_per_step={hp.outputs_per_step}, mask_memory={self.mask_memory}")



def _stored_model(model_json, path: str) -> tuple[Tacotron1HParams, str]:
    """The hparams and layout of a migrated file's ``model`` entry, else one :class:`MigratedFileError` line."""
    if model_json is None:
        raise MigratedFileError(f"{path!r} holds blocks, not a whole model: read its blocks with "
                                "torch_layers.load_migrated")
    try:
        entry = json.loads(model_json)
        if entry.get("class_name") != "Tacotron1" or not isinstance(entry.get("hparams"), dict):
            raise ValueError
        return resolve_tacotron1_model(entry["hparams"], entry.get("layout"))
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
        raise MigratedFileError(f"{path!r}: its `model` entry is damaged or not a Tacotron-1 model (expected JSON with "
                                "class_name 'Tacotron1', valid hparams and a layout)") from None
