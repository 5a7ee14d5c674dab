"""The framework-free pieces of ``speechblocks train``: the Adam slots in TF1's names and layout
(:mod:`speechblocks.training.optimizer_slots`, a TF1 checkpoint written here in numpy), the backend contract
(everything :mod:`~speechblocks.training.run`, :mod:`~speechblocks.training.hooks` and
:mod:`~speechblocks.training.gta` call on a trainer is a member of
:class:`~speechblocks.training.backend.TrainerBackend`), and the loop with its hooks driven by a numpy trainer that
satisfies the protocol: hooks called in order around every step, exact resume, a signal's stop, a diverged step.
No framework is imported (a few seconds of CPU)."""
from __future__ import annotations

import ast
import json
import os
import signal
from types import SimpleNamespace

import numpy as np
import pytest

from speechblocks.crc32c import crc32c
from speechblocks.training import optimizer_slots as slots_module
from speechblocks.training import run as run_module
from speechblocks.training.backend import StepResult, TrainerBackend
from speechblocks.training.checkpoint_files import read_state
from speechblocks.training.hooks import TrainingHook
from speechblocks.training.optimizer_slots import framework_moments, read_tf1_adam_state, tf1_slots
from speechblocks.training.run import TrainingDivergedError, TrainOptions, train
from tests.helpers import tf1_index_writer as iw
from tests.helpers.tiny_training import TINY, tiny_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRANSPOSED = SimpleNamespace(to_tf1=np.transpose, from_tf1=np.transpose)  # a layout that differs from TF1's
SAME = SimpleNamespace(to_tf1=None, from_tf1=None)


# -- optimizer slots --------------------------------------------------------------------------------------------
def test_tf1_slots_names_layout_and_copies():
    m, v = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)
    b = np.array([1.0, 2.0], np.float32)
    out = tf1_slots({"dense/kernel": (m, v), "dense/bias": (b, 2 * b)}, {"dense/kernel": TRANSPOSED,
                                                                        "dense/bias": SAME})
    assert sorted(out) == ["dense/bias/Adam", "dense/bias/Adam_1", "dense/kernel/Adam", "dense/kernel/Adam_1"]
    assert np.array_equal(out["dense/kernel/Adam"], m.T) and np.array_equal(out["dense/kernel/Adam_1"], v.T)
    assert np.array_equal(out["dense/bias/Adam_1"], 2 * b)
    b[0] = 7.0  # the trainer's buffer changes at its next step: the slots written are a copy
    assert out["dense/bias/Adam"][0] == 1.0


def test_framework_moments_round_trip_and_refusals():
    bindings = {"dense/kernel": TRANSPOSED, "dense/bias": SAME}
    shapes = {"dense/kernel": (2, 3), "dense/bias": (2,)}
    moments = {"dense/kernel": (np.arange(6.0).reshape(2, 3), np.full((2, 3), 0.5)),
               "dense/bias": (np.array([1.0, 2.0]), np.array([3.0, 4.0]))}
    back = framework_moments(tf1_slots(moments, bindings), bindings, shapes)
    for name, pair in moments.items():
        for got, want in zip(back[name], pair):
            assert got.dtype == np.float32 and np.array_equal(got, want)
    assert framework_moments({}, bindings, shapes) == {}
    partial = tf1_slots({"dense/kernel": moments["dense/kernel"]}, bindings)
    with pytest.raises(ValueError, match=r"no Adam slots for 1 variable\(s\), e.g. 'dense/bias'"):
        framework_moments(partial, bindings, shapes)
    wrong = tf1_slots(moments, {"dense/kernel": SAME, "dense/bias": SAME})  # the kernel's slots not transposed
    with pytest.raises(ValueError, match=r"slot dense/kernel/Adam has shape \[3, 2\], the variable \[2, 3\]"):
        framework_moments(wrong, bindings, shapes)


def _write_tf1_checkpoint(prefix: str, tensors: dict) -> None:
    """A TF1 checkpoint (``.index`` + one data shard) of float32 and int64 arrays, written in numpy."""
    codes = {np.dtype(np.float32): 1, np.dtype(np.int64): 9}  # DT_FLOAT, DT_INT64
    data, entries = bytearray(), []
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name]).tobytes()
        entries.append((name.encode(), iw.entry(codes[tensors[name].dtype], tensors[name].shape, len(data),
                                                len(raw), crc32c(raw))))
        data += raw
    with open(prefix + ".index", "wb") as f:
        f.write(iw.table([(b"", iw.header())] + entries))
    with open(prefix + ".data-00000-of-00001", "wb") as f:
        f.write(bytes(data))


def test_read_tf1_adam_state(tmp_path):
    scope = slots_module.MODEL_SCOPE
    rng = np.random.default_rng(0)
    arrays = {f"{scope}{n}/{s}": rng.standard_normal(3).astype(np.float32)
              for n in ("a/kernel", "b/bias") for s in ("Adam", "Adam_1")}
    step = {"global_step": np.array(100, np.int64)}
    power = {"Tacotron_model/optimizer/beta1_power": np.array(0.9 ** 101, np.float32)}
    cases = {"all": {**arrays, **step, **power}, "no power": {**arrays, **step},
             "a slot missing": {**{k: v for k, v in arrays.items() if not k.endswith("b/bias/Adam_1")}, **step,
                                **power},
             "no step": {**arrays, **power}}
    got = {}
    for case, tensors in cases.items():
        prefix = str(tmp_path / case.replace(" ", "-"))
        _write_tf1_checkpoint(prefix, tensors)
        got[case] = read_tf1_adam_state(prefix, ["a/kernel", "b/bias"], 0.9)
    step_read, (updates, slots) = got["all"]
    assert (step_read, updates) == (100, 100)
    assert sorted(slots) == ["a/kernel/Adam", "a/kernel/Adam_1", "b/bias/Adam", "b/bias/Adam_1"]
    assert all(np.array_equal(slots[k], arrays[scope + k]) for k in slots)
    assert got["no power"] == (100, None) and got["a slot missing"] == (100, None)
    assert got["no step"][0] == 0 and got["no step"][1][0] == 100  # the update count from beta1_power alone


# -- the backend contract -----------------------------------------------------------------------------------------
def _called_on_a_trainer(path: str) -> set[str]:
    """The attributes a module reads of ``trainer``, ``run.trainer`` or ``backend_cls``."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name in ("trainer", "backend_cls"):
                out.add(node.attr)
    return out


def test_the_loop_and_gta_call_only_the_protocol():
    members = {n for n in vars(TrainerBackend) if not n.startswith("_")} | set(TrainerBackend.__annotations__)
    called = set()
    for module in ("run", "hooks", "gta"):
        called |= _called_on_a_trainer(os.path.join(ROOT, "speechblocks", "training", f"{module}.py"))
    assert called <= members, sorted(called - members)
    assert len(called) >= 14, sorted(called)  # the reading above finds the calls


# -- the loop and its hooks, with a numpy trainer ----------------------------------------------------------------
class NumpyTrainer:
    """A :class:`TrainerBackend` in numpy: three float32 weights stepped by a momentum update from each batch's mean
    target and the step's seed (the loss depends on the weights, the batch and the seed)."""

    framework = "numpy"
    model_suffix = ".npy"
    nan_at: int | None = None  # the update count whose step diverges

    def __init__(self, hparams, w=None):
        self.hparams = hparams
        self.w = np.zeros(3, np.float32) if w is None else np.asarray(w, np.float32)
        self.updates, self.m, self.v = 0, None, None

    @classmethod
    def new(cls, hparams, seed: int = 0):
        return cls(hparams, np.random.default_rng(seed).standard_normal(3))

    @classmethod
    def from_model_file(cls, path, hparams=None):
        return cls(hparams, np.load(path))

    @classmethod
    def from_tf1_checkpoint(cls, path, hparams=None):
        raise NotImplementedError

    @classmethod
    def with_hparams(cls, trainer, hparams):
        return cls(hparams, trainer.w)

    @classmethod
    def distribution(cls):
        return None

    def trainable_names(self):
        return ["w"]

    def train_step(self, batch, learning_rate, seed, rows=None):
        g = (np.random.default_rng(seed).standard_normal(3) + batch["mel_targets"].mean()).astype(np.float32)
        loss = float(np.sum(self.w ** 2) + g[0]) * (np.nan if self.updates == self.nan_at else 1.0)
        if not np.isfinite(loss):
            return StepResult({"loss": loss}, float(np.linalg.norm(g)), applied=False)
        self.m = g * np.float32(0.1) if self.m is None else self.m * np.float32(0.9) + g * np.float32(0.1)
        self.v = g * g if self.v is None else self.v + g * g
        self.w = self.w - np.float32(learning_rate) * self.m
        self.updates += 1
        return StepResult({"loss": loss, "before_loss": loss}, float(np.linalg.norm(g)))

    def evaluate(self, batch, seed):
        return {"loss": float(np.sum(self.w ** 2))}, batch["mel_targets"][0], np.zeros((3, 2), np.float32)

    def teacher_forced(self, batch, max_iters, seed):
        return batch["mel_targets"]

    def save_model(self, path, source=""):
        with open(path, "wb") as f:
            np.save(f, self.w)

    def optimizer_state(self):
        return self.updates, {} if self.m is None else tf1_slots({"w": (self.m, self.v)}, {"w": SAME})

    def load_optimizer_state(self, updates, slots):
        self.updates = int(updates)
        self.m, self.v = framework_moments(slots, {"w": SAME}, {"w": (3,)}).get("w", (None, None))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    tiny_corpus(root)
    return str(root)


def _options(data, run, steps, **overrides):
    return TrainOptions(data, str(run), "rtvc", dict(TINY, **overrides), steps=steps, progress=False)


def _latest(run):
    with open(os.path.join(run, "checkpoints", "latest.json")) as f:
        latest = json.load(f)
    meta, slots = read_state(os.path.join(run, "checkpoints", latest["state"]))
    return latest, np.load(os.path.join(run, "checkpoints", latest["model"])), meta, slots


def test_the_numpy_trainer_is_a_backend():
    assert isinstance(NumpyTrainer(None), TrainerBackend)


def test_resume_is_exact_through_the_hooks(data, tmp_path):
    every2 = dict(tacotron_checkpoint_interval=2)
    whole = train(NumpyTrainer, _options(data, tmp_path / "a", 5, **every2))
    first = train(NumpyTrainer, _options(data, tmp_path / "b", 3, **every2))
    second = train(NumpyTrainer, TrainOptions(data, str(tmp_path / "b"), steps=2, progress=False))
    assert whole.global_step == second.global_step == 5 and first.checkpoint.endswith("tacotron2-00000003.npy")
    assert [x["loss"] for x in whole.losses] == [x["loss"] for x in first.losses + second.losses]
    (la, wa, meta_a, slots_a), (lb, wb, meta_b, slots_b) = _latest(tmp_path / "a"), _latest(tmp_path / "b")
    assert la == lb and meta_a["adam_updates"] == 5 and meta_a["sampler"] == meta_b["sampler"]
    assert np.array_equal(wa, wb) and sorted(slots_a) == ["w/Adam", "w/Adam_1"]
    assert all(np.array_equal(slots_a[k], slots_b[k]) for k in slots_a)
    # checkpoints: before the first step, every 2 steps, and the last step (3 of the first invocation)
    assert sorted(os.listdir(tmp_path / "a" / "checkpoints")) == ["latest.json"] + [
        f"tacotron2-{s:08d}.{ext}" for s in (0, 2, 4, 5) for ext in ("npy", "state.npz")]
    assert sorted(os.listdir(tmp_path / "b" / "checkpoints"))[1:] == [
        f"tacotron2-{s:08d}.{ext}" for s in (0, 2, 3, 4, 5) for ext in ("npy", "state.npz")]
    assert len(os.listdir(tmp_path / "a" / "events")) == 1


def test_a_signal_stops_after_the_step_with_a_checkpoint(data, tmp_path):
    seen = []

    def on_step(step, result):
        seen.append((step, result.learning_rate))
        if step in (2, 4):
            os.kill(os.getpid(), signal.SIGTERM)

    handler = signal.getsignal(signal.SIGTERM)
    result = train(NumpyTrainer, _options(data, tmp_path / "r", 6), on_step=on_step)
    assert signal.getsignal(signal.SIGTERM) is handler  # restored
    assert result.signal == signal.SIGTERM and result.global_step == 2 and [s for s, _ in seen] == [1, 2]
    assert result.checkpoint.endswith("tacotron2-00000002.npy") and _latest(tmp_path / "r")[0]["step"] == 2
    assert all(rate is not None for _, rate in seen)
    last = train(NumpyTrainer, TrainOptions(data, str(tmp_path / "r"), steps=2, progress=False), on_step=on_step)
    assert last.signal == signal.SIGTERM and last.global_step == 4  # a signal during the last step is reported


def test_a_diverged_step_names_the_step_and_the_last_checkpoint(data, tmp_path, monkeypatch):
    monkeypatch.setattr(NumpyTrainer, "nan_at", 2)
    with pytest.raises(TrainingDivergedError, match=r"the loss is nan at step 3 on the batch of utterances \[.+\]; "
                       r"the update was not applied \(last checkpoint: .*tacotron2-00000002.npy\)"):
        train(NumpyTrainer, _options(data, tmp_path / "r", 5, tacotron_checkpoint_interval=2))
    latest, _, meta, _ = _latest(tmp_path / "r")
    assert latest["step"] == 2 and meta["sampler"]["batches"] == 2


class _Recorder(TrainingHook):
    def __init__(self, name, calls, stop_at=None):
        self.name, self.calls, self.stop_at, self.asked = name, calls, stop_at, 0

    def stop_requested(self):
        self.asked += 1
        self.calls.append((self.name, "stop?"))
        return 15 if self.asked == self.stop_at else 0

    def on_step(self, step, result, seconds):
        assert seconds >= 0 and result.learning_rate is not None
        self.calls.append((self.name, step))

    def on_end(self, step):
        self.calls.append((self.name, "end", step))


def test_the_loop_calls_its_hooks_in_order(data, tmp_path):
    run = run_module._resolve_run(NumpyTrainer, _options(data, tmp_path / "r", 5), None)
    prepared = run_module._prepare_data(run, _options(data, tmp_path / "r", 5))
    calls: list = []
    out = run_module.TrainResult(run.start_step, [], None)
    hooks = [_Recorder("a", calls), _Recorder("b", calls, stop_at=3)]
    run_module._run_steps(run, prepared, hooks, 5, out)
    assert calls == [("a", "stop?"), ("b", "stop?"), ("a", 1), ("b", 1),
                     ("a", "stop?"), ("b", "stop?"), ("a", 2), ("b", 2),
                     ("a", "stop?"), ("b", "stop?"), ("a", "end", 2), ("b", "end", 2)]
    assert out.signal == 15 and out.global_step == 2 and len(out.losses) == len(out.timings) == 2
    assert prepared.sampler.state_dict()["batches"] == 2
