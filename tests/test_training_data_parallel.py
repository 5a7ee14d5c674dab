"""``speechblocks train`` data-parallel: 2 processes (torch, ``torchrun``) or 2 replicas (Keras, ``--strategy
mirrored`` over 2 logical CPU devices) train as 1 process on the same global batch.

On a tiny corpus written in the test (8 training utterances, global batch 4, 2 steps, dropout 0.5 and zoneout 0.1
on: each step's keep-masks are drawn for the global batch from the step's seed and each rank runs its rows; the
optional guided-attention term on, weight 0.5):

* **torch**: ``torchrun --nproc-per-node 2 -m speechblocks.cli train ... --framework torch`` (gloo on CPU) for 2
  steps against ``train()`` of 2 steps in this process: the per-step loss and gradient norm (before clipping) that
  rank 0 wrote to RUN/events (read here by a hand-written decoder of the event records, independent of the writer)
  equal the single process's (relative 1e-5), and so do the weights after the 2 steps (batch-norm moving statistics
  included) and the Adam slots (1e-5), the step count and the data order (sampler state); only rank 0 writes (one
  event file, one result line). The run is resumable: both runs resumed for a 3rd step (in this process) take the
  same step. (One launch: each worker spends ~11 s of CPU importing torch and, for DDP, ``torch._dynamo``.)
* **Keras**: ``run.train`` with the command's ``--strategy mirrored --replicas 2`` trainer class
  (``Tacotron2Trainer.mirrored``) against the plain trainer (both stepped eagerly:
  the same Keras code as the traced step, without its ~30 s of tracing per trainer), in a subprocess (logical
  devices must be set before TensorFlow initialises): losses, gradient norms, final weights and Adam slots (1e-5).

The learning rate is 1e-4 (weights move ~1e-4 a step, 10x the tolerance): Adam divides each gradient by its own
running magnitude, so the conv biases right before a batch norm -- whose exact gradient is 0 and whose computed one
is rounding noise of ~1e-8 that differs with the split -- move by up to ``lr * noise / epsilon``; at the preset's
1e-3 that is ~8e-6 (measured), at 1e-4 below 1e-6. The loss and the unclipped gradient norm (which any wrong
reduction or batch statistic changes) are compared exactly as they are.

Bad input (one line, exit 2): ``--strategy mirrored`` with torch, ``--framework keras`` under torchrun
(``WORLD_SIZE=2``), ``--replicas`` without ``--strategy``.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.tiny_training import TINY, set_args, tiny_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TOL = 1e-5
DEADLINE = 300  # seconds for one launch (2 processes importing torch on a loaded 2-core machine take 20-40 s)
SETS = dict(tacotron_batch_size=4, tacotron_initial_learning_rate=1e-4)
GUIDED = 0.5  # the optional guided-attention term on (normalised over the global batch like the masked terms)


# -- the event records, decoded by hand (TFRecord framing, Event / Summary.Value protobuf fields) -------------------
def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes):
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wire}")
        yield number, value


def read_scalars(run: str) -> dict:
    """``{(step, tag): value}`` of every event file of ``RUN/events``."""
    out = {}
    events = os.path.join(run, "events")
    for name in sorted(os.listdir(events)):
        data = open(os.path.join(events, name), "rb").read()
        i = 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            record = data[i + 12:i + 12 + n]
            i += 12 + n + 4
            fields = list(_fields(record))
            step = next((v for k, v in fields if k == 2), 0)
            for summary in (v for k, v in fields if k == 5):
                for _, value in ((k, v) for k, v in _fields(summary) if k == 1):
                    parts = dict(_fields(value))
                    if 2 in parts:
                        out[(step, parts[1].decode())] = struct.unpack("<f", parts[2])[0]
    return out


def _final(run: str, read_model):
    from speechblocks.training.checkpoint_files import read_state

    with open(os.path.join(run, "checkpoints", "latest.json")) as f:
        latest = json.load(f)
    meta, slots = read_state(os.path.join(run, "checkpoints", latest["state"]))
    return read_model(os.path.join(run, "checkpoints", latest["model"])), meta, slots


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", **extra)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    tiny_corpus(root)
    return str(root)


# -- torch: torchrun ------------------------------------------------------------------------------------------------
def test_torchrun_two_processes_train_as_one(data, tmp_path):
    torch = pytest.importorskip("torch")
    from speechblocks.training.run import TrainOptions, train
    from torch_layers import Tacotron2
    from torch_layers.tacotron2_trainer import Tacotron2Trainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    norms = []
    try:
        one = train(Tacotron2Trainer, TrainOptions(data, str(tmp_path / "one"), "rtvc", dict(TINY, **SETS), steps=2,
                                                   progress=False, guided_attention=GUIDED),
                    on_step=lambda s, r: norms.append(r.grad_norm))
    finally:
        torch.set_num_threads(threads)
    run = str(tmp_path / "ddp")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
            "--master-port", str(_free_port()), "-m", "speechblocks.cli", "train", data, run,
            "--framework", "torch", "--hparams", "rtvc", "--steps", "2", "--quiet",
            "--guided-attention", str(GUIDED)] + set_args(**SETS)
    proc = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines() == [f"{run}: step 2, checkpoint {run}/checkpoints/tacotron2-00000002.pt"]
    assert len(os.listdir(os.path.join(run, "events"))) == 1  # rank 0's

    scalars = read_scalars(run)
    for step in (1, 2):
        assert scalars[(step, "stats/loss")] == pytest.approx(one.losses[step - 1]["loss"], rel=TOL)
        assert scalars[(step, "stats/gradient_norm")] == pytest.approx(norms[step - 1], rel=TOL)
    assert one.losses[0]["loss"] != pytest.approx(one.losses[1]["loss"], rel=1e-3)

    def weights(path):
        return {k: v.numpy() for k, v in Tacotron2.from_migrated(path).state_dict().items()}

    (wa, meta_a, slots_a), (wb, meta_b, slots_b) = _final(str(tmp_path / "one"), weights), _final(run, weights)
    assert meta_a["sampler"] == meta_b["sampler"] and meta_a["global_step"] == meta_b["global_step"] == 2
    assert meta_a["adam_updates"] == meta_b["adam_updates"] == 2
    assert sorted(wa) == sorted(wb) and sorted(slots_a) == sorted(slots_b)
    assert max(float(np.abs(wa[k] - wb[k]).max()) for k in wa) <= TOL
    assert max(float(np.abs(slots_a[k] - slots_b[k]).max()) for k in slots_a) <= TOL
    start = weights(os.path.join(run, "checkpoints", "tacotron2-00000000.pt"))
    assert max(float(np.abs(wb[k] - start[k]).max()) for k in wb) > 10 * TOL  # the steps moved the weights

    torch.set_num_threads(1)
    try:  # both resumed by one process for a 3rd step
        third = [train(Tacotron2Trainer, TrainOptions(data, r, steps=1, progress=False)).losses[0]["loss"]
                 for r in (str(tmp_path / "one"), run)]
    finally:
        torch.set_num_threads(threads)
    assert third[1] == pytest.approx(third[0], rel=TOL)
    (wa, meta_a, _), (wb, meta_b, _) = _final(str(tmp_path / "one"), weights), _final(run, weights)
    assert meta_a["sampler"] == meta_b["sampler"] and meta_a["global_step"] == meta_b["global_step"] == 3
    assert max(float(np.abs(wa[k] - wb[k]).max()) for k in wa) <= TOL


# -- Keras: MirroredStrategy over 2 logical CPU devices -----------------------------------------------------------
def _keras_worker(data: str, out: str) -> None:
    """(subprocess) 2 steps with one device and with 2 mirrored replicas; prints one JSON line of figures."""
    from speechblocks.cli import _trainer_class

    mirrored = _trainer_class("keras", "mirrored", 2)  # the command's way: the devices set before TF starts
    import tf_layers
    from speechblocks.training.run import TrainOptions, train
    from tf_layers.tacotron2_trainer import Tacotron2Trainer

    Tacotron2Trainer.run_eagerly = True
    figures, results = {}, {}
    for name, backend in (("one", Tacotron2Trainer), ("mirrored", mirrored)):
        norms: list = []
        result = train(backend, TrainOptions(data, os.path.join(out, name), "rtvc", dict(TINY, **SETS), steps=2,
                                             progress=False, guided_attention=GUIDED),
                       on_step=lambda s, r, n=norms: n.append(r.grad_norm))
        results[name] = ([x["loss"] for x in result.losses], norms,
                         _final(os.path.join(out, name),
                                lambda p: {k: np.asarray(v) for k, v in
                                           tf_layers.Tacotron2.from_migrated(p).tf1_weights().items()}))
    (la, na, (wa, ma, sa)), (lb, nb, (wb, mb, sb)) = results["one"], results["mirrored"]
    figures["replicas"] = int(mirrored.strategy.num_replicas_in_sync)
    figures["losses"] = [la, lb]
    figures["norms"] = [na, nb]
    figures["weights"] = max(float(np.abs(wa[k] - wb[k]).max()) for k in wa)
    figures["same_names"] = sorted(wa) == sorted(wb) and sorted(sa) == sorted(sb)
    figures["slots"] = max(float(np.abs(sa[k] - sb[k]).max()) for k in sa)
    figures["sampler"] = ma["sampler"] == mb["sampler"] and ma["adam_updates"] == mb["adam_updates"] == 2
    print(json.dumps(figures))


def test_keras_mirrored_two_replicas_train_as_one_device(data, tmp_path):
    pytest.importorskip("tensorflow")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "keras", data, str(tmp_path)], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["replicas"] == 2 and figures["same_names"] and figures["sampler"]
    (la, lb), (na, nb) = figures["losses"], figures["norms"]
    np.testing.assert_allclose(lb, la, rtol=TOL)
    np.testing.assert_allclose(nb, na, rtol=TOL)
    assert abs(la[0] - la[1]) > 1e-3 * abs(la[0])
    assert figures["weights"] <= TOL and figures["slots"] <= TOL


# -- bad input ------------------------------------------------------------------------------------------------------
def test_bad_combinations_one_line_exit_2(data, tmp_path, capsys, monkeypatch):
    from speechblocks import cli

    cases = [
        (["--framework", "torch", "--strategy", "mirrored"], {}, "--strategy mirrored is for --framework keras"),
        (["--strategy", "mirrored"], {}, "--strategy mirrored is for --framework keras"),  # torch by default
        (["--framework", "keras"], {"WORLD_SIZE": "2"}, "torchrun started 2 processes (WORLD_SIZE)"),
        (["--framework", "keras", "--replicas", "2"], {}, "--replicas goes with --strategy mirrored"),
        (["--framework", "keras", "--strategy", "mirrored", "--replicas", "0"], {}, "--replicas must be >= 1"),
    ]
    for extra, env, text in cases:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        rc = cli.main(["train", data, str(tmp_path / "r"), "--steps", "1"] + extra)
        for k in env:
            monkeypatch.delenv(k)
        _, err = capsys.readouterr()
        assert rc == 2 and len(err.strip().splitlines()) == 1 and text in err, (extra, err)
    assert not os.path.exists(tmp_path / "r")  # refused before anything was written


if __name__ == "__main__":
    if sys.argv[1] == "keras":
        _keras_worker(sys.argv[2], sys.argv[3])
