"""The Keras and torch ``Tacotron2`` keep one contract: every public method both have takes the same arguments,
in the same order, of the same kind, with the same defaults; what only one framework can offer is listed here
with its reason, so the list is the whole difference."""
from __future__ import annotations

import inspect

import tf_layers
import torch_layers

#: public names only one framework has, and why
KERAS_ONLY = {"build", "call", "compute_loss", "from_config", "get_config",  # keras.Model's protocol
              "export_serving",  # a SavedModel with the decoding loop in the graph (torch: the two modules below)
              "export_litert",  # builtin-ops-only LiteRT models + a numpy host loop (torch: the same two modules)
              "tf1_scope"}  # the blocks' TF1 scope property (torch: a constructor argument of the blocks)
TORCH_ONLY = {"forward", "extra_repr",  # nn.Module's protocol
              "encoder_module", "decoder_step_module",  # exportable pieces for torch.export / ONNX
              "regularized_parameters"}  # add_loss's L2 terms (Keras: tacotron2_loss reads the variables)
#: keyword-only arguments one framework's loaders take for its own runtime
KERAS_KEYWORDS = {"loss_reduction"}  # the model's fit() loss (torch: tacotron2_loss(reduction=))
TORCH_KEYWORDS = {"map_location", "device", "dtype"}  # where the parameters live


def _public(cls) -> set[str]:
    out = set()
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in ("tf_layers", "torch_layers", "speechblocks"):
            out |= {n for n in vars(klass) if not n.startswith("_")}
    return out


def _params(fn, extra: set[str]) -> list[tuple[str, str, object]]:
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(fn).parameters.values() if p.name not in extra]


def test_the_same_public_methods():
    k, t = _public(tf_layers.Tacotron2), _public(torch_layers.Tacotron2)
    assert k - t == KERAS_ONLY
    assert t - k == TORCH_ONLY


def test_the_same_signatures():
    k, t = tf_layers.Tacotron2, torch_layers.Tacotron2
    shared = sorted(_public(k) & _public(t))
    checked = 0
    for name in shared:
        a, b = inspect.getattr_static(k, name), inspect.getattr_static(t, name)
        if isinstance(a, property) or not callable(getattr(k, name)):
            continue
        assert _params(getattr(k, name), KERAS_KEYWORDS) == _params(getattr(t, name), TORCH_KEYWORDS), name
        assert type(a) is type(b), f"{name}: {type(a).__name__} vs {type(b).__name__}"  # classmethod, function
        checked += 1
    assert checked >= 8
