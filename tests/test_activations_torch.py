import pytest
import torch

from torch_layers import activations


@pytest.mark.parametrize("name", ["relu", "tanh", "sigmoid", "linear", "elu", "gelu"])
def test_functional_form_matches_module(name):
    x = torch.linspace(-3, 3, 13)
    torch.testing.assert_close(activations.apply(name, x), activations.get(name)()(x))


def test_unknown_and_parametric_names_raise():
    with pytest.raises(ValueError, match="activation"):
        activations.get("swishy")
    with pytest.raises(ValueError, match="prelu"):
        activations.apply("prelu", torch.zeros(2))
    assert activations.name_of(None) == "linear"
    assert activations.get(None) is torch.nn.Identity
