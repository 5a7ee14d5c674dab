"""Property tests of the masked losses (``masked_mse``, ``masked_sigmoid_cross_entropy``,
``masked_linear_loss``; Keras, torch, twins) and of ``sequence_mask``.

The original masks every loss term by ``sequence_mask(targets_lengths, r)``, so finite padding past the lengths
changes no loss (non-finite padding is the masking-by-selection change, tested with the losses themselves). The
batch loss is a ratio of sums over the masked elements, so it is the rows' losses weighted by their lengths
(``sum_i loss_i * len_i / sum_i len_i``: every channel counts alike; random logits give no zero cross-entropy
term). The time axis of the targets is fixed by the original (``max(lengths)`` rounded up to ``r``), so padding
is only replaced, never appended.
"""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tf_layers
import torch_layers
from tests.helpers.properties import SCALAR, BlockProperties, property_tests, to_numpy
from tests.helpers.strategies import LENGTH_LAYOUTS, lengths_array, normal, round_up, value_seeds


@st.composite
def loss_cases(draw, channels):
    """``(targets, outputs, lengths, r)`` arrays; ``channels=None``: the 2-D stop-token loss."""
    r = draw(st.integers(1, 3))
    batch, longest = draw(st.integers(1, 4)), draw(st.integers(1, 7))
    rng = np.random.default_rng(draw(value_seeds))
    lengths = lengths_array(draw(st.sampled_from(LENGTH_LAYOUTS)), batch, longest, rng)
    shape = (batch, round_up(lengths.max(), r)) + (() if channels is None else (channels,))
    targets = (rng.random(shape) < 0.5).astype(np.float32) if channels is None else normal(rng, shape)
    return {"targets": targets, "outputs": normal(rng, shape, 2.0), "targets_lengths": lengths,
            "r": np.full(batch, r, np.int32)}  # r per row: the driver slices every entry by batch


class MaskedLossProperties(BlockProperties):
    padded = {"targets": "targets_lengths", "outputs": "targets_lengths"}
    outputs = {"loss": SCALAR}
    properties = ("padding", "permutation", "rows", "float64", "mixed", "twin")
    channels = 5
    fn = None  # the loss function's name in both packages
    keywords: dict = {}

    def cases(self):
        return loss_cases(self.channels)

    def row(self, case, i):  # cut to the row's length rounded up to the case's r
        out = {k: v[i:i + 1] for k, v in case.items()}
        n = round_up(int(case["targets_lengths"][i]), int(case["r"][0]))
        return {k: (v[:, :n] if k in self.padded else v) for k, v in out.items()}

    def pad(self, case, extra, seed):
        return super().pad(case, 0, seed)  # the targets' time axis is fixed by the lengths and r

    def make(self, framework, precision):
        return getattr(tf_layers if framework == "keras" else torch_layers, self.fn)

    def weights(self, instance, seed):
        return None

    def load(self, instance, framework, weights):
        pass

    def call(self, fn, framework, precision, case):
        r = int(case["r"][0])
        t, o = case["targets"], case["outputs"]
        if precision == "float64":
            t, o = t.astype(np.float64), o.astype(np.float64)
        if framework == "keras":
            if precision == "mixed":  # what a mixed_float16 model hands the loss: float16 outputs
                o = o.astype(np.float16)
            return {"loss": to_numpy(fn(t, o, case["targets_lengths"], outputs_per_step=r, **self.keywords))}
        with torch.autocast("cpu", enabled=precision == "mixed"):
            y = fn(torch.from_numpy(t), torch.from_numpy(o), torch.from_numpy(case["targets_lengths"]).long(),
                   outputs_per_step=r, **self.keywords)
        return {"loss": to_numpy(y)}

    def combine_rows(self, name, values, case):
        lengths = case["targets_lengths"].astype(np.float64)
        return np.sum(np.asarray(values, np.float64) * lengths) / lengths.sum()


class MaskedMSEProperties(MaskedLossProperties):
    name, fn = "masked_mse", "masked_mse"


class MaskedSigmoidCrossEntropyProperties(MaskedLossProperties):
    name, fn, channels = "masked_sigmoid_cross_entropy", "masked_sigmoid_cross_entropy", None
    keywords = dict(pos_weight=2.0)


class MaskedLinearLossProperties(MaskedLossProperties):
    name, fn, channels = "masked_linear_loss", "masked_linear_loss", 6
    keywords = dict(sample_rate=8000.0)  # n_priority = int(2000 / 4000 * 6) = 3 of 6 bins


for _block in (MaskedMSEProperties(), MaskedSigmoidCrossEntropyProperties(), MaskedLinearLossProperties()):
    globals().update({f"{k}__{_block.name}": v for k, v in property_tests(_block).items()})


# -- sequence_mask: an independent reference (t < length, width max rounded up to r) ---------------------------
def _reference_mask(lengths, r):
    width = round_up(max(lengths.max(initial=0), 0), r)
    return (np.arange(width)[None, :] < lengths[:, None]).astype(np.float32)


def _masks(lengths, r):
    keras_mask = to_numpy(tf_layers.sequence_mask(lengths, r, expand=False))
    torch_mask = to_numpy(torch_layers.sequence_mask(torch.from_numpy(lengths).long(), r, expand=False))
    return {"keras": keras_mask, "torch": torch_mask}


@given(st.integers(1, 5), st.integers(0, 9), st.sampled_from(LENGTH_LAYOUTS), value_seeds, st.integers(1, 4))
def test_sequence_mask_matches_reference_and_permutes_with_the_batch(batch, longest, layout, seed, r):
    rng = np.random.default_rng(seed)
    lengths = lengths_array(layout, batch, longest, rng, min_length=0)
    want = _reference_mask(lengths, r)
    perm = rng.permutation(batch)
    for framework, mask in _masks(lengths, r).items():
        np.testing.assert_array_equal(mask, want, err_msg=framework)
        np.testing.assert_array_equal(_masks(lengths[perm], r)[framework], mask[perm], err_msg=framework)
        for i in range(batch):  # a row alone: the batch's row cut to its own rounded-up width
            alone = _masks(lengths[i:i + 1], r)[framework]
            np.testing.assert_array_equal(alone[0], mask[i, :alone.shape[1]], err_msg=framework)
            assert not mask[i, alone.shape[1]:].any()


@pytest.mark.parametrize("lengths", [[], [0, 0]])
def test_sequence_mask_of_empty_lengths_has_no_frames(lengths):
    lengths = np.asarray(lengths, np.int32)
    for framework, mask in _masks(lengths, 3).items():
        assert mask.shape == (len(lengths), 0), framework
