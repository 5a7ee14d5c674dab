"""Property tests of the whole ``Tacotron2`` (RTVC layout, small sizes; Keras, torch, twins), teacher forced
(GTA: ``eval()`` with ``mel_targets``; the prenet's always-on dropout gets injected keep-masks, part of each case).

What the original masks, hence what is invariant (and tested):

- mel targets past ``target_lengths`` -- step ``t`` reads only the target frame ``r*t - 1``, so no valid frame
  (``< target_length``) of ``decoder_outputs`` and ``stop_token_prediction``, and no alignment of a step holding a
  valid frame, reads padding; appended padding steps change none of them. ``mel_outputs`` add the Postnet, which
  reads padding: only its frames before ``target_length - postnet_num_layers * (postnet_kernel_size // 2)`` are
  invariant.
- input ids past ``input_lengths`` are NOT invariant: the encoder convolutions read the
  ``enc_conv_num_layers * (enc_conv_kernel_size // 2)`` ids after each length (the documented behaviour of
  ``EncoderConvolutions``); ids further past it change nothing (the encoder LSTM stops at the length, attention
  masks the memory past it). Hence a row run alone keeps the batch's ids and is cut to its own target frames.

The loss (``tacotron2_loss``): with ``mask_decoder`` the before-postnet MSE and the stop-token cross-entropy mask
the frames past ``target_lengths``, so they are invariant to the targets' padding in GTA (``eval()``) -- tested
below (the targets' time axis is fixed to ``max(target_lengths)`` rounded up to ``r`` there, as the masked losses
require); the after-postnet MSE reads padding through the Postnet; RTVC's default ``mask_decoder=False``
averages over padding (every term changes); in training, batch norm's batch statistics read every padded frame
of the batch, so no training-mode term is invariant in the original either.

float64 and mixed precision of the whole model are covered by ``tests/test_tacotron2_{keras,torch}.py``.
"""
import numpy as np
import torch
from hypothesis import strategies as st

import tf_layers
import torch_layers
from tests.helpers.properties import SCALAR, BlockProperties, property_tests, to_numpy
from tests.helpers.strategies import LENGTH_LAYOUTS, lengths_array, normal, value_seeds
from tests.helpers.tacotron2_checkpoint import small_variables

#: shorter convolution stacks than SMALL_RTVC: every case has frames beyond the reach of both stacks
OVERRIDES = dict(enc_conv_kernel_size=3, enc_conv_num_layers=2, postnet_kernel_size=3, postnet_num_layers=2,
                 max_iters=1000)
HPARAMS = small_variables("rtvc", 0, **OVERRIDES)[0]
R = HPARAMS.outputs_per_step
ENCODER_REACH = HPARAMS.enc_conv_num_layers * (HPARAMS.enc_conv_kernel_size // 2)
POSTNET_REACH = HPARAMS.postnet_num_layers * (HPARAMS.postnet_kernel_size // 2)
PRENET = [f"prenet_{i}" for i in range(len(HPARAMS.prenet_layers))]


class Tacotron2Properties(BlockProperties):
    name = "Tacotron2"
    properties = ("padding", "permutation", "rows", "twin")
    outputs = {"decoder_outputs": "target_lengths", "stop_token_prediction": "target_lengths"}
    tol = 2e-5  # end to end, recurrent (the model's own unit tests use 2e-5)
    examples_scale = 0.5

    def cases(self):
        @st.composite
        def case(draw):
            rng = np.random.default_rng(draw(value_seeds))
            batch = draw(st.integers(1, 3))
            t_in, steps = draw(st.integers(1, 9)), draw(st.integers(1, 4))
            input_lengths = lengths_array(draw(st.sampled_from(LENGTH_LAYOUTS)), batch, t_in, rng)
            target_lengths = lengths_array(draw(st.sampled_from(LENGTH_LAYOUTS)), batch, R * steps, rng)
            out = {"inputs": rng.integers(1, HPARAMS.n_symbols, size=(batch, t_in)).astype(np.int32),
                   "input_lengths": input_lengths,
                   "speaker_embeddings": normal(rng, (batch, HPARAMS.speaker_embedding_size)),
                   "mel_targets": normal(rng, (batch, R * steps, HPARAMS.num_mels)),
                   "target_lengths": target_lengths}
            for name, size in zip(PRENET, HPARAMS.prenet_layers):
                out[name] = (rng.random((batch, steps, size)) < 0.5).astype(np.float32)
            return out
        return case()

    def make(self, framework, precision):
        if framework == "keras":
            return tf_layers.Tacotron2(HPARAMS)
        return torch_layers.Tacotron2(HPARAMS).eval()

    def weights(self, instance, seed):
        return small_variables("rtvc", seed, **OVERRIDES)[1]

    def load(self, instance, framework, weights):
        instance.load_tf1_weights(weights)

    def call(self, model, framework, precision, case):
        args = [case[k] for k in ("inputs", "input_lengths", "speaker_embeddings", "mel_targets")]
        masks = [case[name] for name in PRENET]
        if framework == "keras":
            out = model(*args, noise_masks={"prenet": masks}, training=False)
        else:
            with torch.no_grad():
                ids, lens = (torch.from_numpy(a).long() for a in args[:2])
                spk, mel = (torch.from_numpy(a) for a in args[2:])
                out = model(ids, lens, spk, mel, noise_masks={"prenet": [torch.from_numpy(m) for m in masks]})
        return {k: to_numpy(v) for k, v in out.items()}

    def valid(self, outputs, case, rows=None):
        out = super().valid(outputs, case, rows)
        for b in range(len(case["inputs"])) if rows is None else rows:
            frames = int(case["target_lengths"][b])
            out[("mel_outputs", b)] = outputs["mel_outputs"][b, :max(frames - POSTNET_REACH, 0)]
            out[("alignments", b)] = outputs["alignments"][b, :int(case["input_lengths"][b]), :-(-frames // R)]
        return out

    def pad(self, case, extra, seed):
        """Ids past ``length + ENCODER_REACH`` and target frames past ``target_length`` replaced; ``extra // 2``
        decoder steps of padded frames (and keep-masks) appended."""
        rng = np.random.default_rng(seed)
        out = {k: v.copy() for k, v in case.items()}
        steps = extra // 2
        if steps:
            batch = len(case["inputs"])
            out["mel_targets"] = np.concatenate(
                [out["mel_targets"], np.zeros((batch, R * steps, HPARAMS.num_mels), np.float32)], 1)
            for name in PRENET:
                more = (rng.random((batch, steps, case[name].shape[2])) < 0.5).astype(np.float32)
                out[name] = np.concatenate([out[name], more], 1)
        for b in range(len(case["inputs"])):
            start = int(case["input_lengths"][b]) + ENCODER_REACH
            out["inputs"][b, start:] = rng.integers(0, HPARAMS.n_symbols, size=out["inputs"][b, start:].shape)
            start = int(case["target_lengths"][b])
            out["mel_targets"][b, start:] = 100.0 * rng.standard_normal(out["mel_targets"][b, start:].shape)
        return out

    def row(self, case, i):
        out = {k: v[i:i + 1] for k, v in case.items()}
        steps = -(-int(case["target_lengths"][i]) // R)
        out["mel_targets"] = out["mel_targets"][:, :R * steps]
        for name in PRENET:
            out[name] = out[name][:, :steps]
        return out


class Tacotron2LossProperties(Tacotron2Properties):
    """The masked loss terms of a ``mask_decoder=True`` model over GTA outputs (see the module docstring)."""

    name = "tacotron2_loss(mask_decoder=True)"
    properties = ("padding", "permutation", "twin")
    outputs = {"before_loss": SCALAR, "stop_token_loss": SCALAR}
    hparams = small_variables("rtvc", 0, mask_decoder=True, **OVERRIDES)[0]

    def cases(self):
        def fixed_time(case):  # targets of max(target_lengths) rounded up to r frames
            steps = -(-int(case["target_lengths"].max()) // R)
            out = dict(case, mel_targets=case["mel_targets"][:, :R * steps])
            out.update({name: case[name][:, :steps] for name in PRENET})
            frames = np.arange(R * steps)[None, :]
            out["stop_token_targets"] = (frames >= case["target_lengths"][:, None] - 1).astype(np.float32)
            return out
        return super().cases().map(fixed_time)

    def make(self, framework, precision):
        if framework == "keras":
            return tf_layers.Tacotron2(self.hparams)
        return torch_layers.Tacotron2(self.hparams).eval()

    def call(self, model, framework, precision, case):
        outputs = super().call(model, framework, precision, case)
        targets = [case["mel_targets"], case["stop_token_targets"], case["target_lengths"]]
        if framework == "keras":
            losses = tf_layers.tacotron2_loss(model, outputs, *targets)
        else:
            outputs = {k: torch.from_numpy(v) for k, v in outputs.items()}
            losses = torch_layers.tacotron2_loss(model, outputs, *(torch.from_numpy(t) for t in targets[:2]),
                                                 torch.from_numpy(targets[2]).long())
        return {k: to_numpy(losses[k]) for k in self.outputs}

    def valid(self, outputs, case, rows=None):
        return BlockProperties.valid(self, outputs, case, rows)

    def pad(self, case, extra, seed):
        out = super().pad(case, 0, seed)
        for b, n in enumerate(case["target_lengths"]):  # the stop targets' padding too
            out["stop_token_targets"][b, int(n):] = np.random.default_rng(seed + b).random(
                out["stop_token_targets"][b, int(n):].shape)
        return out


globals().update(property_tests(Tacotron2Properties()))
globals().update({f"{k}__loss": v for k, v in property_tests(Tacotron2LossProperties()).items()})
