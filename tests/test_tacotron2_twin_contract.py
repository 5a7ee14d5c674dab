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


def _protocol_methods(protocol) -> list[str]:
    return sorted(n for n, v in vars(protocol).items() if not n.startswith("_") and callable(getattr(protocol, n)))


def _check_protocol(cls, protocol) -> int:
    """Every method of ``protocol`` on ``cls`` with its parameters (names, kinds, defaults) and its kind
    (classmethod, function); every ``ClassVar`` a string class attribute. Returns the number of methods checked."""
    for name in _protocol_methods(protocol):
        want, have = inspect.getattr_static(protocol, name), inspect.getattr_static(cls, name, None)
        assert have is not None, f"{cls.__module__}.{cls.__name__} has no {name}"
        assert type(have) is type(want), f"{name}: {type(have).__name__}, the protocol's {type(want).__name__}"
        assert _params(getattr(cls, name), set()) == _params(getattr(protocol, name), set()), name
    for name, annotation in protocol.__annotations__.items():
        if annotation.startswith("ClassVar"):  # the protocol's class attributes are strings
            assert annotation == "ClassVar[str]" and isinstance(getattr(cls, name, None), str), name
    return len(_protocol_methods(protocol))


def test_both_trainers_satisfy_the_backend_protocol():
    """``speechblocks.training.backend.TrainerBackend`` is what the training loop and GTA call: each framework's
    trainer has every member with the same signature (a trainer or the protocol drifting fails here)."""
    from speechblocks.training.backend import Distribution, TrainerBackend
    from tf_layers.tacotron2_trainer import Tacotron2Trainer as KerasTrainer
    from torch_layers.tacotron2_trainer import Tacotron2Trainer as TorchTrainer
    from torch_layers.tacotron2_trainer import TorchDistributed

    for trainer in (KerasTrainer, TorchTrainer, KerasTrainer.mirrored(strategy=object())):
        assert _check_protocol(trainer, TrainerBackend) == 12
    assert {KerasTrainer.framework, TorchTrainer.framework} == {"keras", "torch"}
    assert _check_protocol(TorchDistributed, Distribution) == 3
