import math

import numpy as np
import pytest
import torch

from bench._seed_reference_gaussian_embedding import seed_forward
from tests.helpers.torch_module_test import Fails, Skip, run_torch_module_test
from torch_layers import GaussianEmbedding, repeat_merge

NUM_LABELS, PAD, BLANK = 12, 0, 1


def _batch(b, n, seed=0, ragged=True):
    """Blank-interleaved ``(b, 2n+1)`` ids and durations; rows after the first are right-padded."""
    g = torch.Generator().manual_seed(seed)
    text = torch.randint(2, NUM_LABELS, (b, 2 * n + 1), generator=g)
    text[:, ::2] = BLANK
    durs = torch.randint(0, 6, (b, 2 * n + 1), generator=g)
    if ragged:
        for i in range(1, b):
            keep = 2 * max(0, n - 2 * i) + 1
            text[i, keep:] = PAD
            durs[i, keep:] = 0
    return text, durs


def _frames(text, durs, blank_free=True):
    return int(durs.sum(1).max())


def _inputs(b, t, dtype):
    return list(_batch(b, t, seed=b * 10 + t))


@pytest.mark.parametrize("blank_free,merge_blanks", [(True, False), (False, True)])
def test_module_contract(blank_free, merge_blanks):
    good_text, good_durs = _batch(2, 3)
    neg = good_durs.clone()
    neg[1, 2] = -1
    bad_ids = good_text.clone()
    bad_ids[0, 1] = NUM_LABELS
    run_torch_module_test(
        GaussianEmbedding, (NUM_LABELS, 5, PAD), dict(merge_blanks=merge_blanks, blank_free=blank_free),
        make_inputs=_inputs,
        expected_output_shape=lambda b, t: (b, _frames(*_batch(b, t, seed=b * 10 + t)), 5),
        export=Fails("the number of frames is the largest sum of durations (a value of the input), and the "
                     "durations are checked by value", match="data-dependent"),
        compile=None if blank_free else Skip("compiled in the blank-free variant (same upsampling code; ~10 s each)"),
        bad_inputs=[
            ([good_text, neg], "durs"),
            ([good_text, good_durs[:, :5]], "durs"),
            ([good_text[:, :6], good_durs[:, :6]], "2n+1"),
            ([bad_ids, good_durs], "text"),
            ([good_text.float(), good_durs], "text"),
            ([good_text, good_durs.float()], "durs"),
            ([good_text[0], good_durs[0]], "text"),
        ],
    )


def test_state_dict_keys_are_upstream():
    m = GaussianEmbedding(NUM_LABELS, 4, PAD)
    assert list(m.state_dict()) == ["embed.weight"]
    assert m.state_dict()["embed.weight"].shape == (NUM_LABELS, 4)


def test_hand_derived_two_tokens_and_padded_row():
    # standard TalkNet, tokens a=3, b=4 lasting 1 frame each: sigma = 0.5, centres 0.5 and 1.5,
    # frame times 0.5 and 1.5. Frame 0 weighs a by phi(0) and b by phi(2) (z = 1 / 0.5): p = 1 / (1 + e^-2).
    m = GaussianEmbedding(6, 6, PAD, blank_free=False)
    with torch.no_grad():
        m.embed.weight.copy_(torch.eye(6))
    text = torch.tensor([[3, 4], [5, PAD]])
    durs = torch.tensor([[1, 1], [1, 0]])
    with torch.no_grad():
        u = m(text, durs)
    p = 1.0 / (1.0 + math.exp(-2.0))
    expect = np.zeros((2, 2, 6))
    expect[0, 0, 3], expect[0, 0, 4] = p, 1 - p
    expect[0, 1, 3], expect[0, 1, 4] = 1 - p, p
    expect[1, 0, 5] = 1.0  # a lone token takes all the weight
    expect[1, 1, PAD] = 1.0  # past the row's end: the last column, a pad token
    np.testing.assert_allclose(u.numpy(), expect, atol=1e-5)


def test_hand_derived_blank_free_merges_durations_into_previous_token():
    # (blank, a, blank, b, blank) with durations (2, 2, 1, 1, 0) -> (blank, a, b) with (2, 3, 1);
    # a 3-frame token centred at 3.5 with sigma 1.5: its weights on frames 2, 3, 4 are phi(-2/3), phi(0), phi(2/3)
    m = GaussianEmbedding(6, 6, PAD, blank_free=True)
    with torch.no_grad():
        m.embed.weight.copy_(torch.eye(6))
    text = torch.tensor([[BLANK, 3, BLANK, 4, BLANK]])
    durs = torch.tensor([[2, 2, 1, 1, 0]])
    with torch.no_grad():
        u = m(text, durs)[0].numpy()
    assert u.shape == (6, 6)

    def density(t, c, s):
        return math.exp(-((t + 0.5 - c) ** 2) / (2 * s * s)) / s

    cols = [(BLANK, 1.0, 1.0), (3, 3.5, 1.5), (4, 5.5, 0.5)]  # (id, centre, sigma)
    for t in range(6):
        dens = np.array([density(t, c, s) for _, c, s in cols])
        expect = np.zeros(6)
        for (tok, _, _), v in zip(cols, dens / dens.sum()):
            expect[tok] += v
        np.testing.assert_allclose(u[t], expect, atol=1e-5)


@pytest.mark.parametrize("blank_free", [True, False])
@pytest.mark.parametrize("merge_blanks", [False, True])
def test_matches_seed_reference_forward_and_gradient(blank_free, merge_blanks):
    torch.manual_seed(0)
    m = GaussianEmbedding(NUM_LABELS, 7, PAD, merge_blanks=merge_blanks, blank_free=blank_free)
    text, durs = _batch(4, 9, seed=3)
    durs[0, 5] = 40  # a long token: wide Gaussian over many columns
    probe = torch.randn(4, int(durs.sum(1).max()), 7)

    ref = seed_forward(m.embed, PAD, text, durs, merge_blanks=merge_blanks, blank_free=blank_free)
    (g_ref,) = torch.autograd.grad((ref * probe).sum(), m.embed.weight)
    for budget in (1 << 18, 50):  # one block per batch group / frame blocks of one row
        m.chunk_elements = budget
        with torch.no_grad():
            np.testing.assert_allclose(m(text, durs).numpy(), ref.detach().numpy(), atol=1e-5)
        out = m(text, durs)  # autograd path: weights recomputed in backward
        (g,) = torch.autograd.grad((out * probe).sum(), m.embed.weight)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-5)
        np.testing.assert_allclose(g.numpy(), g_ref.numpy(), atol=1e-4)
    scripted = torch.jit.script(m)
    out = scripted(text, durs)  # scripted autograd path (one weights buffer)
    (g,) = torch.autograd.grad((out * probe).sum(), m.embed.weight)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(g.numpy(), g_ref.numpy(), atol=1e-4)


@pytest.mark.parametrize("sigma_c", [0.5, 2.0, 9.0])
def test_banded_blocks_keep_every_nonzero_column(sigma_c):
    # long and zero durations side by side: wide Gaussians reach far into neighbouring blocks
    torch.manual_seed(5)
    m = GaussianEmbedding(NUM_LABELS, 3, PAD, sigma_c=sigma_c)
    text, durs = _batch(2, 6, seed=7)
    durs[0, 3], durs[0, 4], durs[1, 1] = 150, 0, 90
    ref = seed_forward(m.embed, PAD, text, durs, sigma_c=sigma_c).detach().numpy()
    for budget in (1 << 18, 40):  # 256-frame blocks / 5-frame blocks
        m.chunk_elements = budget
        with torch.no_grad():
            np.testing.assert_allclose(m(text, durs).numpy(), ref, atol=1e-5)


def test_pad_token_columns_get_no_weight_even_with_a_duration():
    # upstream zeroes the columns of pad ids whatever their duration
    torch.manual_seed(1)
    m = GaussianEmbedding(NUM_LABELS, 3, PAD, blank_free=False)
    text = torch.tensor([[3, PAD, 4, 5]])
    durs = torch.tensor([[2, 3, 2, 1]])
    with torch.no_grad():
        u = m(text, durs)
    ref = seed_forward(m.embed, PAD, text, durs, blank_free=False).detach()
    np.testing.assert_allclose(u.numpy(), ref.numpy(), atol=1e-5)
    # frames 2..4 belong to the pad id: weight 1 on the last column, the appended pad
    np.testing.assert_allclose(u[0, 2:5].numpy(), np.tile(m.embed.weight[PAD].detach().numpy(), (3, 1)), atol=1e-6)


def test_all_zero_durations_give_zero_frames():
    m = GaussianEmbedding(NUM_LABELS, 4, PAD)
    text, durs = _batch(2, 3)
    out = m(text, torch.zeros_like(durs))
    assert out.shape == (2, 0, 4)


def test_float64_factory_matches_float32():
    torch.manual_seed(2)
    m32 = GaussianEmbedding(NUM_LABELS, 4, PAD)
    m64 = GaussianEmbedding(NUM_LABELS, 4, PAD, dtype=torch.float64)
    m64.load_state_dict({"embed.weight": m32.embed.weight.detach().double()})
    text, durs = _batch(3, 6, seed=4)
    with torch.no_grad():
        a, b = m32(text, durs), m64(text, durs)
    assert b.dtype == torch.float64
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def _loop_repeat_merge(x, reps, pad):
    rows = [np.repeat(x[i], reps[i]) for i in range(x.shape[0])]
    width = max((len(r) for r in rows), default=0)
    out = np.full((x.shape[0], width), pad, dtype=x.dtype)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def test_repeat_merge_matches_per_row_repeat_interleave():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, (6, 9))
    reps = rng.integers(0, 4, (6, 9))
    reps[2] = 0  # an empty row
    got = repeat_merge(torch.from_numpy(x), torch.from_numpy(reps), -1).numpy()
    np.testing.assert_array_equal(got, _loop_repeat_merge(x, reps, -1))
    xf = rng.standard_normal((3, 4)).astype(np.float32)
    rf = rng.integers(0, 3, (3, 4))
    np.testing.assert_array_equal(repeat_merge(torch.from_numpy(xf), torch.from_numpy(rf), 0).numpy(),
                                  _loop_repeat_merge(xf, rf, 0))
    scripted = torch.jit.script(repeat_merge)
    np.testing.assert_array_equal(scripted(torch.from_numpy(x), torch.from_numpy(reps), -1).numpy(), got)


def test_repeat_merge_bad_input():
    x = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="reps"):
        repeat_merge(x, torch.tensor([[1, -1, 0], [0, 0, 0]]), 0)
    with pytest.raises(ValueError, match="reps"):
        repeat_merge(x, torch.ones(2, 4, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="reps"):
        repeat_merge(x, torch.ones(2, 3), 0)
    with pytest.raises(ValueError, match="x"):
        repeat_merge(torch.zeros(2, 3, 1), torch.ones(2, 3, 1, dtype=torch.long), 0)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="pad"):
        GaussianEmbedding(5, 4, pad=5)
    with pytest.raises(ValueError, match="sigma_c"):
        GaussianEmbedding(5, 4, pad=0, sigma_c=0.0)
