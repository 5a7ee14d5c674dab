"""Hostile and damaged upstream checkpoints (issue #13): the GE2E ``encoder.pt`` (RTVC layout), TAC (asteroid), the
NeMo / fairseq state dicts of GaussianEmbedding, ContrastiveLoss and GumbelVectorQuantizer -- into the torch modules
(``load_state_dict``, ``SpeakerEncoder.from_checkpoint``, ``read_state_dict``) and into the Keras twins
(``load_torch_state_dict``). Wrong, missing and extra keys, wrong shapes, wrong dtypes, malicious pickles: one clear
error, nothing half-loaded, no pickled code ever runs.
"""
from __future__ import annotations

import copy
import os
import re

import numpy as np
import pytest
import torch
from torch import nn

import tf_layers
import torch_layers
from speechblocks.state_dict import StateDictError
from tests.helpers.migrated_files import flip_tensor_byte, write_malicious

SMALL_GE2E = dict(mel_n_channels=6, model_hidden_size=8, model_num_layers=2, model_embedding_size=5)

#: (torch class / Keras class name, args, kwargs): the four torch-native modules (+ the quantizer), small
MODULES = {
    "SpeakerEncoder": ((), SMALL_GE2E),
    "TAC": ((6, 5), {}),
    "GaussianEmbedding": ((12, 4, 0), {}),
    "ContrastiveLoss": ((4,), dict(proj_dim=6)),
    "ContrastiveLoss quantized": ((4,), dict(proj_dim=6, quantized_targets=True, num_groups=2, codebook_size=3)),
    "GumbelVectorQuantizer": ((6, 5), dict(groups=2, vq_dim=4)),
}


def _torch_module(case: str, seed: int) -> nn.Module:
    args, kwargs = MODULES[case]
    torch.manual_seed(seed)
    m = getattr(torch_layers, case.split()[0])(*args, **kwargs)
    with torch.no_grad():
        for p in m.state_dict(keep_vars=True).values():
            if p.is_floating_point():
                p.normal_()
    return m


def _snapshot(module: nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _hostile(state: dict) -> tuple[dict, list[str]]:
    """A state dict with one good changed tensor, a mis-shaped one, a missing one and an unknown one; the keys
    each problem names."""
    keys = list(state)
    bad = {k: v.clone() + 1.0 for k, v in state.items()}  # every value changed: none may be assigned
    bad[keys[0]] = torch.zeros(*state[keys[0]].shape, 2)
    bad["extra.weight"] = torch.zeros(3)
    if len(keys) == 1:
        return bad, [keys[0], "extra.weight"]
    del bad[keys[-1]]
    return bad, [keys[0], keys[-1], "extra.weight"]


def _one_error(err, *names):
    msg = str(err.value)
    assert all(n in msg for n in names), msg
    return msg


# -- torch modules: load_state_dict is all or nothing -------------------------------------------------
@pytest.mark.parametrize("case", sorted(MODULES))
def test_torch_load_state_dict_is_all_or_nothing(case):
    src, dst = _torch_module(case, 1), _torch_module(case, 2)
    before = _snapshot(dst)
    bad, names = _hostile(src.state_dict())
    # torch's own load_state_dict copies what fits, then raises: the library bug this fixes
    plain = copy.deepcopy(dst)
    if len(before) > 2:
        with pytest.raises(RuntimeError):
            nn.Module.load_state_dict(plain, bad)
        assert any(not torch.equal(plain.state_dict()[k], before[k]) for k in before)
    with pytest.raises(StateDictError) as err:
        dst.load_state_dict(bad)
    assert isinstance(err.value, ValueError) and isinstance(err.value, RuntimeError)
    msg = _one_error(err, *names)
    assert f"{len(names)} problem(s)" in msg and "nothing was assigned" in msg
    for k, v in dst.state_dict().items():
        assert torch.equal(v, before[k]), k
    # and a good state dict loads exactly
    dst.load_state_dict(src.state_dict())
    for k, v in dst.state_dict().items():
        assert torch.equal(v, src.state_dict()[k]), k


@pytest.mark.parametrize("case", sorted(MODULES))
def test_torch_load_state_dict_kinds_and_non_strict(case):
    src, dst = _torch_module(case, 1), _torch_module(case, 2)
    state = src.state_dict()
    first = next(iter(state))
    before = _snapshot(dst)
    for value, problem in ((state[first].to(torch.int32), "integer dtype"), ("not a tensor", "holds a str"),
                           (state[first].to(torch.bool), "bool dtype")):
        with pytest.raises(ValueError, match=problem):
            dst.load_state_dict({**state, first: value})
    for k, v in dst.state_dict().items():
        assert torch.equal(v, before[k]), k
    with pytest.raises(ValueError, match="expected a mapping"):
        dst.load_state_dict([("a", torch.zeros(1))])
    # non-strict: missing / unknown keys reported as torch does; a wrong shape still refused, nothing assigned
    partial = {k: v for k, v in state.items() if k != first}
    result = dst.load_state_dict({**partial, "unknown": torch.zeros(1)}, strict=False)
    assert result.missing_keys == [first] and result.unexpected_keys == ["unknown"]
    with pytest.raises(ValueError, match="has shape"):
        dst.load_state_dict({first: torch.zeros(7, 7, 7)}, strict=False)
    # another floating precision converts, as torch's own
    dst.load_state_dict({k: v.double() for k, v in state.items()})
    for k, v in dst.state_dict().items():
        assert torch.equal(v, state[k]), k


# -- Keras twins: load_torch_state_dict ---------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(MODULES))
def test_keras_load_torch_state_dict_is_all_or_nothing(case):
    args, kwargs = MODULES[case]
    src, good = _torch_module(case, 1), _torch_module(case, 3).state_dict()
    layer = getattr(tf_layers, case.split()[0])(*args, **kwargs)
    layer.load_torch_state_dict(good)  # upstream tensors (torch), builds the layer
    before = layer.torch_state_dict()
    for k, v in before.items():  # the Keras LSTM holds one bias: the sum of torch's bias_ih and bias_hh
        if ".bias_ih_" in k:
            hh = k.replace("_ih_", "_hh_")
            np.testing.assert_allclose(v + before[hh], (good[k] + good[hh]).numpy(), rtol=1e-6, atol=1e-6)
        elif ".bias_hh_" not in k:
            np.testing.assert_array_equal(v, good[k].numpy())
    bad, names = _hostile(src.state_dict())
    with pytest.raises(ValueError) as err:
        layer.load_torch_state_dict(bad)
    _one_error(err, *names)
    first = next(iter(good))
    for value, problem in ((good[first].to(torch.int64), "integer dtype"),
                           (np.array(["x"] * good[first].numel()).reshape(good[first].shape), "not a tensor")):
        with pytest.raises(ValueError, match=problem):
            layer.load_torch_state_dict({**src.state_dict(), first: value})
    for k, v in layer.torch_state_dict().items():
        np.testing.assert_array_equal(v, before[k])


# -- GE2E encoder.pt (RTVC layout) --------------------------------------------------------------------
def _rtvc_file(path, state, legacy=False) -> str:
    opt = {"state": {}, "param_groups": [{"lr": 1e-4, "params": list(range(len(state)))}]}
    torch.save({"step": 1000, "model_state": state, "optimizer_state": opt}, path,
               _use_new_zipfile_serialization=not legacy)
    return str(path)


def _refused(path, match):
    with pytest.raises(ValueError) as err:
        torch_layers.SpeakerEncoder.from_checkpoint(path)
    msg = str(err.value)
    assert "\n" not in msg and repr(os.fspath(path)) in msg and re.search(match, msg), msg


def test_ge2e_encoder_file_in_both_torch_formats_loads_exactly(tmp_path):
    src = _torch_module("SpeakerEncoder", 1).eval()
    x = torch.randn(2, 7, 6)
    with torch.no_grad():
        want = src(x)
    for legacy in (False, True):  # RTVC's published encoder.pt predates torch's zip format
        m = torch_layers.SpeakerEncoder.from_checkpoint(_rtvc_file(tmp_path / f"e{legacy}.pt", src.state_dict(),
                                                                   legacy)).eval()
        with torch.no_grad():
            torch.testing.assert_close(m(x), want, atol=0, rtol=0)


GE2E_CASES = {
    "renamed key": (lambda s: s.__setitem__("linear.b", s.pop("linear.bias")),
                    "missing key 'linear.bias'.*unexpected key 'linear.b'"),
    "extra key": (lambda s: s.__setitem__("extra.weight", torch.zeros(2)), "unexpected key 'extra.weight'"),
    "wrong shape": (lambda s: s.__setitem__("lstm.weight_hh_l1", torch.zeros(32, 9)),
                    r"'lstm.weight_hh_l1' has shape \[32, 9\], expected \[32, 8\]"),
    "integer tensor": (lambda s: s.__setitem__("similarity_weight", torch.tensor([10])), "integer dtype"),
    "not a tensor": (lambda s: s.__setitem__("linear.bias", [0.0] * 5), "holds a list"),
    "no encoder keys": (lambda s: s.pop("lstm.weight_hh_l0"), "holds no encoder state dict"),
    "1-D first kernel": (lambda s: s.__setitem__("lstm.weight_ih_l0", torch.zeros(32)), "holds no encoder state dict"),
    "inconsistent sizes": (lambda s: s.__setitem__("linear.weight", torch.zeros(5, 7)), "linear.weight"),
    "huge sizes in empty tensors": (lambda s: s.update({"lstm.weight_hh_l0": torch.zeros(0, 10 ** 6),
                                                        "linear.weight": torch.zeros(10 ** 6, 0)}),
                                    r"has shape \[0, 1000000\], expected \[4000000, 1000000\]"),
}


@pytest.mark.parametrize("case", sorted(GE2E_CASES))
def test_ge2e_encoder_file_damage(case, tmp_path):
    state = _torch_module("SpeakerEncoder", 1).state_dict()
    edit, match = GE2E_CASES[case]
    edit(state)
    _refused(_rtvc_file(tmp_path / "encoder.pt", state), match)


def test_ge2e_encoder_file_truncated_or_flipped(tmp_path):
    good = _rtvc_file(tmp_path / "encoder.pt", _torch_module("SpeakerEncoder", 1).state_dict())
    data = open(good, "rb").read()  # noqa: SIM115
    for cut in (0, 40, len(data) // 2, len(data) - 3):
        (tmp_path / "cut.pt").write_bytes(data[:cut])
        _refused(tmp_path / "cut.pt", "truncated or damaged|not a readable torch file")
    (tmp_path / "flip.pt").write_bytes(data)
    flip_tensor_byte(tmp_path / "flip.pt", at=2, mask=0x40)  # torch.load itself would not notice
    _refused(tmp_path / "flip.pt", "CRC-32")
    _refused(tmp_path, "is a directory")
    with pytest.raises(FileNotFoundError):
        torch_layers.SpeakerEncoder.from_checkpoint(tmp_path / "none.pt")


# -- malicious pickles: every upstream reader ---------------------------------------------------------
UPSTREAM_READERS = {
    "SpeakerEncoder.from_checkpoint": torch_layers.SpeakerEncoder.from_checkpoint,
    "read_state_dict": torch_layers.read_state_dict,
    "read_state_dict(prefix)": lambda p: torch_layers.read_state_dict(p, prefix="masker.tac"),
}


@pytest.mark.parametrize("form", ["zip", "legacy", "raw"])
@pytest.mark.parametrize("reader", sorted(UPSTREAM_READERS))
def test_malicious_upstream_pickles_never_run(reader, form, tmp_path):
    marker = tmp_path / "pwned"
    state = _torch_module("SpeakerEncoder", 1).state_dict()
    path = write_malicious(tmp_path / "encoder.pt", marker, form, {"model_state": state, "state_dict": state})
    with pytest.raises(ValueError) as err:
        UPSTREAM_READERS[reader](path)
    msg = str(err.value)
    assert "\n" not in msg and repr(path) in msg and "weights_only=True" in msg, msg
    assert not marker.exists()


# -- read_state_dict: the safe reader for TAC / NeMo / fairseq checkpoints ----------------------------
def test_read_state_dict_layouts_into_the_modules(tmp_path):
    tac = _torch_module("TAC", 1)
    emb = _torch_module("GaussianEmbedding", 1)
    loss = _torch_module("ContrastiveLoss quantized", 1)
    # asteroid: the TAC inside a separator's state dict; NeMo (Lightning ckpt); fairseq ({"model", "cfg"})
    torch.save({"model_name": "FasNetTAC", "state_dict": {**{f"masker.tac.{k}": v for k, v in tac.state_dict().items()},
                                                          "masker.other.weight": torch.zeros(2)}}, tmp_path / "a.pth")
    torch.save({"epoch": 3, "state_dict": {f"emb.{k}": v for k, v in emb.state_dict().items()}}, tmp_path / "n.ckpt")
    torch.save({"cfg": {"lr": [0.1]}, "model": {f"loss.{k}": v for k, v in loss.state_dict().items()}},
               tmp_path / "f.pt")
    for module, path, prefix in ((tac, "a.pth", "masker.tac"), (emb, "n.ckpt", "emb."), (loss, "f.pt", "loss")):
        fresh = _torch_module(type(module).__name__ + (" quantized" if module is loss else ""), 5)
        fresh.load_state_dict(torch_layers.read_state_dict(tmp_path / path, prefix=prefix))
        for k, v in fresh.state_dict().items():
            assert torch.equal(v, module.state_dict()[k]), k
    # the separator's other weights are not TAC's: without the prefix they are unexpected keys
    with pytest.raises(ValueError, match="unexpected key 'masker.tac.input_tf.0.weight'"):
        _torch_module("TAC", 5).load_state_dict(torch_layers.read_state_dict(tmp_path / "a.pth"))
    with pytest.raises(ValueError, match="no key under the prefix 'decoder.'"):
        torch_layers.read_state_dict(tmp_path / "a.pth", prefix="decoder")
    torch.save({"epoch": 3, "notes": "no tensors"}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="holds no state dict"):
        torch_layers.read_state_dict(tmp_path / "x.pt")
