"""Property tests of ``ContrastiveLoss`` (torch, Keras twin), same-utterance sampling (the default).

The loss reads only the masked steps (``spec_masks`` mean ``> mask_threshold``): targets, outputs and distractors
all come from them, and the draw of the distractors depends on their count only. So arbitrary values at the
unmasked steps of ``spectrograms`` and ``decoder_outputs`` change nothing (with the same generator seed), and
permuting the batch leaves the loss unchanged (the same time indices are drawn for every utterance; the loss is
a sum over targets). ``decoder_lengths`` is accepted and unused, as upstream: the original does not mask by it,
so padding past it is only ignored where it is also unmasked. Twin agreement: the Keras layer with the torch
weights and the distractor indices torch drew.
"""
import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import tf_layers
import torch_layers
from tests.helpers.properties import assert_valid_close, to_numpy
from tests.helpers.strategies import padding_values, value_seeds, weight_seeds

CONFIG = dict(in_dim=3, proj_dim=4, num_negatives=2)
TORCH = torch_layers.ContrastiveLoss(**CONFIG)
KERAS = tf_layers.ContrastiveLoss(**CONFIG)


@st.composite
def cases(draw):
    """``(spectrograms (B, 3, T), spec_masks, decoder_outputs (B, T, 4), masked (B, T))``, every utterance with
    the same number of masked steps (>= num_negatives + 1: distractors drawn without replacement)."""
    rng = np.random.default_rng(draw(value_seeds))
    batch, time = draw(st.integers(1, 3)), draw(st.integers(3, 8))
    n_masked = draw(st.integers(CONFIG["num_negatives"] + 1, time))
    masked = np.zeros((batch, time), bool)
    for b in range(batch):
        masked[b, rng.choice(time, n_masked, replace=False)] = True
    spec = rng.standard_normal((batch, CONFIG["in_dim"], time)).astype(np.float32)
    masks = np.broadcast_to(masked[:, None, :], spec.shape).astype(np.float32)
    out = rng.standard_normal((batch, time, CONFIG["proj_dim"])).astype(np.float32)
    return spec, masks, out, masked


def _load(seed):
    rng = np.random.default_rng(seed)
    state = {k: (0.5 * rng.standard_normal(tuple(v.shape))).astype(np.float32) for k, v in TORCH.state_dict().items()}
    TORCH.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    KERAS.load_torch_state_dict(state)


def _torch_loss(spec, masks, out, sample_seed):
    with torch.no_grad():
        return to_numpy(TORCH(*(torch.from_numpy(np.ascontiguousarray(a)) for a in (spec, masks, out)),
                              generator=torch.Generator().manual_seed(sample_seed)))


@given(case=cases(), seed=weight_seeds, sample_seed=value_seeds, pad_seed=value_seeds)
def test_unmasked_steps_change_nothing_and_batch_order_does_not_matter_torch(case, seed, sample_seed, pad_seed):
    spec, masks, out, masked = case
    _load(seed)
    want = _torch_loss(spec, masks, out, sample_seed)
    rng = np.random.default_rng(pad_seed)
    spec2, out2 = spec.copy(), out.copy()
    for b, t in zip(*np.nonzero(~masked)):
        spec2[b, :, t] = padding_values(rng, CONFIG["in_dim"], np.float32)
        out2[b, t] = padding_values(rng, CONFIG["proj_dim"], np.float32)
    got = _torch_loss(spec2, masks, out2, sample_seed)
    assert_valid_close("ContrastiveLoss", {"loss": got}, {"loss": want}, 1e-5, "unmasked steps replaced")
    perm = rng.permutation(len(spec))
    got = _torch_loss(spec[perm], masks[perm], out[perm], sample_seed)
    assert_valid_close("ContrastiveLoss", {"loss": got}, {"loss": want}, 1e-5, "batch permuted")


@given(case=cases(), seed=weight_seeds, sample_seed=value_seeds)
def test_keras_and_torch_agree_for_drawn_shapes_and_weights(case, seed, sample_seed):
    spec, masks, out, _ = case
    _load(seed)
    want = _torch_loss(spec, masks, out, sample_seed)
    got = to_numpy(KERAS(spec, masks, out, negative_indices=TORCH.negative_indices.numpy()))
    assert_valid_close("ContrastiveLoss", {"loss": got}, {"loss": want}, 1e-5, "Keras<->torch")
