"""Non-finite inputs, torch: every module's documented policy (class docstring), batch isolation of a NaN,
lengths that keep padding NaN out (as TF1's ``dynamic_rnn``), and the masked losses' selection (value and
gradients against a float64 numpy reference on the zeroed padding; extreme finite logits hand-derived),
eager and TorchScript.

The exact NaN/inf positions against the TF1 graph are proven by ``parity_tests/cases/nonfinite_inputs.py``.
"""
import numpy as np
import pytest
import torch

import torch_layers
from tests.helpers import nonfinite as nf

G = np.random.default_rng(8)


def _x(*shape):
    return G.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", nf.TF1_BLOCKS + nf.ATTENTION_BLOCKS + nf.TORCH_NATIVE + nf.LOSSES)
def test_class_docstring_states_the_nonfinite_policy(name):
    assert nf.states_policy(getattr(torch_layers, name))


def _np(t):
    return t.detach().numpy()


def _lstm_run(cell):
    def run(x):
        x = torch.from_numpy(x)
        state, outs = (torch.zeros(x.shape[0], 3), torch.zeros(x.shape[0], 3)), []
        for t in range(x.shape[1]):
            o, state = cell(x[:, t], state)
            outs.append(o)
        return [_np(torch.stack(outs, 1)), _np(state[0]), _np(state[1])]
    return run


def _gru_run(cell):
    def run(x):
        x = torch.from_numpy(x)
        h, outs = torch.zeros(x.shape[0], 3), []
        for t in range(x.shape[1]):
            h = cell(x[:, t], h)
            outs.append(h)
        return [_np(torch.stack(outs, 1))]
    return run


def _attention_run(att):
    def run(memory):
        lengths = torch.tensor([5, 5, 4])
        values, keys = att.process_memory(torch.from_numpy(memory), lengths)
        state, out = torch.zeros(memory.shape[:2]), []
        for s in range(3):
            context, a, state = att.step(torch.full((3, 4), 0.1 * s), state, values, keys, lengths)
            out += [_np(context), _np(a)]
        return out
    return run


def _blocks():
    """name -> (module factory, input shape, run(module) -> x -> list of outputs)."""
    plain = lambda m: lambda x: [_np(m(torch.from_numpy(x)))]  # noqa: E731
    lengths = lambda m: lambda x: [_np(m(torch.from_numpy(x), torch.tensor([6, 6, 5])))]  # noqa: E731
    ones = [torch.ones(3, 6, 4), torch.ones(3, 6, 3)]
    return {
        "Conv1DBlock": (lambda: torch_layers.Conv1DBlock(3, 3, 4, "relu", 0.5), (3, 6, 3), plain),
        "EncoderConvolutions": (lambda: torch_layers.EncoderConvolutions(3, 3, 4, 2), (3, 6, 3), plain),
        "Postnet": (lambda: torch_layers.Postnet(3, 3, 4, 5), (3, 6, 3), plain),
        "Prenet": (lambda: torch_layers.Prenet(3, (4, 3)), (3, 6, 3),
                   lambda m: lambda x: [_np(m(torch.from_numpy(x), ones))]),
        "FrameProjection": (lambda: torch_layers.FrameProjection(3, 3), (3, 6, 3), plain),
        "StopProjection": (lambda: torch_layers.StopProjection(3, 2), (3, 6, 3), plain),
        "HighwayNet": (lambda: torch_layers.HighwayNet(3), (3, 6, 3), plain),
        "EncoderRNN": (lambda: torch_layers.EncoderRNN(3, 3), (3, 6, 3), lengths),
        "CBHG": (lambda: torch_layers.CBHG(3, 2, 4, 2, [4, 3], 3, 1, 4, 3), (3, 6, 3), lengths),
        "DecoderRNN": (lambda: torch_layers.DecoderRNN(3, 2, 3), (3, 6, 3),
                       lambda m: lambda x: [_np(m(torch.from_numpy(x))[0])]),
        "ZoneoutLSTMCell": (lambda: torch_layers.ZoneoutLSTMCell(3, 3, 0.1, 0.1), (3, 6, 3), _lstm_run),
        "TF1GRUCell": (lambda: torch_layers.TF1GRUCell(3, 3), (3, 6, 3), _gru_run),
        "LocationSensitiveAttention": (lambda: torch_layers.LocationSensitiveAttention(4, 3, 4, 2, 3), (3, 5, 3),
                                       _attention_run),
        "SpeakerEncoder": (lambda: torch_layers.SpeakerEncoder(3, 4, 1, 3), (3, 6, 3), plain),
        "TAC": (lambda: torch_layers.TAC(3, hidden_dim=4), (3, 4, 2, 3, 2),
                lambda m: lambda x: [_np(m(torch.from_numpy(np.ascontiguousarray(np.moveaxis(x, 1, 3))),
                                           torch.tensor([2, 2, 1])))]),
        "GumbelVectorQuantizer": (lambda: torch_layers.GumbelVectorQuantizer(3, 4, groups=1, vq_dim=2), (3, 6, 3),
                                  lambda m: lambda x: [_np(m(torch.from_numpy(x))[0])]),
    }


@pytest.mark.parametrize("name", sorted(_blocks()))
def test_a_nan_stays_in_its_example(name):
    """A NaN (and +-inf) in examples 0 and 1 leave example 2 exactly as in a clean batch; example 0 is NaN."""
    torch.manual_seed(0)
    make, shape, run = _blocks()[name]
    module = make().eval()
    x = _x(*shape)
    with torch.no_grad():
        clean = run(module)(x)
        dirty = run(module)(nf.poisoned(x))
    nf.assert_isolated(clean, dirty, expect_nan=name != "GumbelVectorQuantizer")


@pytest.mark.parametrize("name", ["EncoderRNN", "CBHG"])
def test_nonfinite_padding_stays_out_of_the_lengths(name):
    """TF1's ``bidirectional_dynamic_rnn(sequence_length=...)`` selects past the length: NaN/inf in padding frames
    beyond every conv window change nothing (outputs past a length are 0), eager and scripted."""
    torch.manual_seed(0)
    module = (torch_layers.EncoderRNN(3, 3) if name == "EncoderRNN"
              else torch_layers.CBHG(3, 2, 4, 2, [4, 3], 3, 1, 4, 3)).eval()
    x = torch.from_numpy(_x(2, 10, 3))
    lengths = torch.tensor([10, 3])
    dirty = x.clone()
    dirty[1, 8:] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    with torch.no_grad():
        clean = module(x, lengths)
        for fn in (module, torch.jit.script(module)):
            got = fn(dirty, lengths)
            assert torch.isfinite(got).all()
            torch.testing.assert_close(got, clean, rtol=1e-6, atol=1e-7)
            assert not got[1, 3:].any()


_FUNCTIONS = {"MaskedMSE": torch_layers.masked_mse,
              "MaskedSigmoidCrossEntropy": torch_layers.masked_sigmoid_cross_entropy,
              "MaskedLinearLoss": torch_layers.masked_linear_loss}


def _value_and_grads(loss, targets, outputs, lengths, **kw):
    t = torch.tensor(targets, requires_grad=True)
    o = torch.tensor(outputs, requires_grad=True)
    value = _FUNCTIONS[loss](t, o, torch.from_numpy(lengths), outputs_per_step=2, **kw)
    gt, go = torch.autograd.grad(value, [t, o])
    return float(value), gt.numpy(), go.numpy()


def _scripted_class_value(loss, targets, outputs, lengths, **kw):
    module = torch.jit.script(getattr(torch_layers, loss)(outputs_per_step=2, **kw))
    return module(torch.from_numpy(targets), torch.from_numpy(outputs), torch.from_numpy(lengths))


@pytest.mark.parametrize("loss", nf.LOSSES)
def test_masked_loss_ignores_nonfinite_padding(loss):
    """Eager functions (value, gradients) and the TorchScript-compiled loss modules."""
    nf.check_selection(loss, _value_and_grads, _scripted_class_value)


@pytest.mark.parametrize("count,divisor", [("mask", 4), ("nonzero_loss", 2)])
def test_cross_entropy_extreme_logits_hand_derived(count, divisor):
    """Logits +-1e4: per element 0, 1e4, pos_weight * 1e4, 0; d/dx = 0, 1, -pos_weight, 0 (over the count)."""
    x = torch.tensor(nf.EXTREME_LOGITS, requires_grad=True)
    value = torch_layers.masked_sigmoid_cross_entropy(torch.from_numpy(nf.EXTREME_TARGETS), x, torch.tensor([4]),
                                                      outputs_per_step=1, pos_weight=2.0, count=count)
    assert float(value) == pytest.approx(nf.EXTREME_PER_ELEMENT.sum() / divisor, rel=1e-6)
    (grad,) = torch.autograd.grad(value, x)
    np.testing.assert_allclose(grad.numpy(), [[0.0, 1.0 / divisor, -2.0 / divisor, 0.0]], atol=1e-7)


def test_large_finite_values_and_all_masked_batches():
    t = torch.zeros(1, 2, 3)
    o = torch.full((1, 2, 3), 1e18)  # squared error 1e36 < float32 max: finite
    assert float(torch_layers.masked_mse(t, o, torch.tensor([2]), outputs_per_step=2)) == pytest.approx(1e36, rel=1e-6)
    assert float(torch_layers.masked_linear_loss(t, o, torch.tensor([2]), outputs_per_step=2, sample_rate=8000)) == \
        pytest.approx(0.5e18 + 0.5e18 * 1 / 3, rel=1e-6)  # n = int(2000 / 4000 * 3) = 1 of 3 bins
    # all-masked with NaN everywhere: 0.0, not NaN, and zero gradients
    for fn, kw, shape in ((torch_layers.masked_mse, {}, (2, 2, 3)),
                          (torch_layers.masked_linear_loss, {"sample_rate": 8000}, (2, 2, 3)),
                          (torch_layers.masked_sigmoid_cross_entropy, {}, (2, 2))):
        a = torch.full(shape, float("nan"), requires_grad=True)
        value = fn(a, a, torch.tensor([0, 0]), outputs_per_step=2, mask=torch.zeros(2, 2), **kw)
        assert float(value) == 0.0
        (grad,) = torch.autograd.grad(value, a)
        assert not grad.any()


def test_tacotron2_loss_masked_terms_ignore_nonfinite_padding():
    """``tacotron2_loss`` with ``mask_decoder``: NaN/inf in the padding of targets and outputs give the loss of the
    zeroed padding, with finite gradients w.r.t. the outputs (0 on the padding)."""
    torch.manual_seed(0)
    model = torch_layers.Tacotron2("rtvc", n_symbols=8, **nf.LOSS_MODEL)
    clean, dirty, pads = nf.loss_batch()
    values = {}
    for name, batch in (("clean", clean), ("dirty", dirty)):
        outs = {k: torch.tensor(batch[k], requires_grad=True) for k in ("decoder_outputs", "mel_outputs",
                                                                         "stop_token_prediction")}
        losses = torch_layers.tacotron2_loss(model, outs, torch.from_numpy(batch["mel_targets"]),
                                             torch.from_numpy(batch["stop_token_targets"]),
                                             torch.from_numpy(batch["lengths"]))
        grads = torch.autograd.grad(losses["loss"], list(outs.values()))
        values[name] = {k: float(v) for k, v in losses.items()}
        for g, k in zip(grads, outs):
            assert torch.isfinite(g).all() and not g.numpy()[pads[k]].any()
    assert all(np.isfinite(v) for v in values["dirty"].values())
    assert values["dirty"] == pytest.approx(values["clean"], rel=1e-6)
