"""The decoder's weight layouts (torch_layers._packed_linear): every layout gives F.linear's numbers."""
import pytest
import torch
import torch.nn.functional as F

from torch_layers._packed_linear import ONEDNN, PackedLinear, pack, packed_linear, row_parts, split_rows


@pytest.mark.parametrize("in_features,threads,parts", [(2048, 1, 2), (2048, 2, 2), (1792, 4, 4), (12, 8, 6),
                                                        (10, 3, 2), (9, 2, 1), (9, 3, 3)])
def test_row_parts_divides_the_input_features(in_features, threads, parts):
    assert row_parts(in_features, threads) == parts


@pytest.mark.parametrize("rows", [1, 2, 5])
@pytest.mark.parametrize("in_features,threads", [(64, 1), (64, 2), (48, 3), (63, 2)])
def test_every_layout_gives_the_linear_product(rows, in_features, threads):
    if not ONEDNN:
        pytest.skip("this torch has no oneDNN")
    g = torch.Generator().manual_seed(rows * 100 + in_features)
    w = torch.randn(40, in_features, generator=g)
    b = torch.randn(40, generator=g)
    x = torch.randn(rows, in_features, generator=g)
    packed = pack(w, rows, threads)
    # one row with an input size the threads divide: the row-split layout; else oneDNN's own
    assert packed.dim() == (3 if rows == 1 and row_parts(in_features, threads) > 1 else 2)
    want = (x.double() @ w.double().t() + b.double()).float()
    torch.testing.assert_close(packed_linear(x, packed, b), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(packed_linear(x, packed, None), want - b, rtol=1e-5, atol=1e-5)


def test_split_rows_blocks_are_the_transposed_rows():
    w = torch.arange(24.0).reshape(4, 6)  # (out, in)
    blocks = split_rows(w, 3)
    assert blocks.shape == (3, 2, 4)
    torch.testing.assert_close(blocks.reshape(6, 4), w.t())
    with pytest.raises(ValueError, match="`parts` must divide the weight's 6 input features; got 4"):
        split_rows(w, 4)


def test_packed_linear_gradient_for_one_row():
    if not ONEDNN:
        pytest.skip("this torch has no oneDNN")
    g = torch.Generator().manual_seed(3)
    w, b = torch.randn(16, 8, generator=g), torch.randn(16, generator=g)
    x = torch.randn(1, 8, generator=g, requires_grad=True)
    y = PackedLinear.apply(x, b, pack(w, 1, 2), pack(w.t(), 1, 2))
    dy = torch.randn(1, 16, generator=g)
    (dx,) = torch.autograd.grad(y, x, dy)
    torch.testing.assert_close(y, F.linear(x, w, b).detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dx, dy @ w, rtol=1e-5, atol=1e-6)


def test_scripted_pack_and_product():
    if not ONEDNN:
        pytest.skip("this torch has no oneDNN")
    scripted_pack, scripted_linear = torch.jit.script(pack), torch.jit.script(packed_linear)
    w, b, x = torch.randn(12, 6), torch.randn(12), torch.randn(1, 6)
    torch.testing.assert_close(scripted_linear(x, scripted_pack(w, 1, 2), b), F.linear(x, w, b), rtol=1e-5,
                               atol=1e-6)
