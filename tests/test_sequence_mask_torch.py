import pytest
import torch

from torch_layers import sequence_mask


def test_hand_derived_mask_rounds_max_length_up_to_multiple_of_r():
    expect = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.float32)
    got = sequence_mask(torch.tensor([1, 3, 2]), 2, expand=False)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expect, rtol=0, atol=0)
    got3 = sequence_mask(torch.tensor([1, 3, 2], dtype=torch.int32), 3)
    assert got3.shape == (3, 3, 1)
    torch.testing.assert_close(got3[:, :, 0], expect[:, :3], rtol=0, atol=0)
    assert sequence_mask(torch.tensor([1, 1]), 3).shape == (2, 3, 1)
    assert sequence_mask(torch.tensor([4]), 5, expand=False).shape == (1, 5)
    assert sequence_mask(torch.zeros(2, dtype=torch.long), 2, expand=False).shape == (2, 0)
    assert sequence_mask(torch.tensor([2]), 1, dtype=torch.bool).dtype == torch.bool


def test_torchscript_matches_eager_for_varying_sizes():
    from torch_layers.sequence_mask import sequence_mask as fn

    scripted = torch.jit.script(fn)
    for lengths, r in (([1, 3, 2], 3), ([7], 2), ([0, 4, 5, 6], 1)):
        lens = torch.tensor(lengths)
        torch.testing.assert_close(scripted(lens, r, False), fn(lens, r, expand=False), rtol=0, atol=0)


@pytest.mark.parametrize("args,fragment", [
    ((torch.tensor([1, 2]), 0), "`r`"),
    ((torch.tensor([1, -2]), 2), "`lengths`"),
    ((torch.tensor([1.0, 2.0]), 2), "`lengths`"),
    ((torch.ones(2, 2, dtype=torch.long), 2), "(batch,)"),
])
def test_bad_input_value_error_names_argument(args, fragment):
    with pytest.raises(ValueError, match="sequence_mask") as err:
        sequence_mask(*args)
    assert fragment in str(err.value)


# the export whatever the import order (`import torch_layers.sequence_mask` first): tests/test_import_isolation.py
