"""Fine-tuning a keithito/mimic2 Tacotron-1 (``speechblocks train --from``): the optimizer against a float64
re-statement of TF1's ``clip_by_global_norm`` + ``AdamOptimizer`` written here, TF's own v1 Adam on an
``IndexedSlices`` gradient, Keras against torch, the learning rate at the checkpoint's step, the feeder's padding,
exact resume and the command line end to end. Tiny sizes; the TF1 checkpoint (weights, Adam slots under
``model/optimizer/model/inference/``, beta powers, ``global_step``) is written in numpy."""
from __future__ import annotations

import os

import numpy as np
import pytest

from speechblocks import cli
from speechblocks.tacotron1_hparams import resolve_tacotron1_hparams
from speechblocks.tacotron1_schema import tf1_variable_shapes
from speechblocks.training.tacotron1 import Tacotron1TrainOptions, train_step, train_tacotron1
from speechblocks.training.tacotron1_data import dropout_masks, load_batch, read_metadata
from speechblocks.training.tacotron1_optimizer import (
    AdamState,
    apply_tf1_adam,
    clip_by_global_norm,
    fresh_state,
    read_tf1_adam_state,
    tf1_update,
)
from tests.test_training_backend import _write_tf1_checkpoint

SIZES = dict(num_mels=6, num_freq=9, outputs_per_step=2, embed_depth=5, prenet_depths=[6, 4], encoder_depth=6,
             attention_depth=5, decoder_depth=7, postnet_depth=6, max_iters=10)
HP = resolve_tacotron1_hparams("keithito", **SIZES)
LAYOUT = "keithito-20180906"
STEP = 1234  # inside keithito's warm-up (4000 steps)
POWERS = (0.9 ** 4, 0.999 ** 4)  # a checkpoint after 3 updates
TEXTS = ["Hello world.", "A cat sat on the mat!", "Dr. Smith paid $5 on 3 May.", "Yes",
         "Turn left on {HH AW1 S T AH0 N} Street."]


def _checkpoint(prefix: str, slots: bool = True, hp=HP, layout: str = LAYOUT, step: int = STEP) -> dict:
    rng = np.random.default_rng(7)
    tensors = {}
    for name, shape in sorted(tf1_variable_shapes(hp, layout).items()):
        value = rng.normal(0, 0.3, shape)
        tensors[f"model/inference/{name}"] = (np.abs(value) + 0.5 if name.endswith("moving_variance") else value)
        if slots and "moving_" not in name:
            tensors[f"model/optimizer/model/inference/{name}/Adam"] = rng.normal(0, 0.01, shape)
            tensors[f"model/optimizer/model/inference/{name}/Adam_1"] = np.abs(rng.normal(0, 1e-4, shape))
    if slots:
        tensors["model/optimizer/beta1_power"], tensors["model/optimizer/beta2_power"] = POWERS
    tensors = {k: np.asarray(v, np.float32) for k, v in tensors.items()}
    tensors["global_step"] = np.array(step, np.int64)
    _write_tf1_checkpoint(prefix, tensors)
    return tensors


def _data(folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(3)
    lines = []
    for i, text in enumerate(TEXTS):
        frames = int(rng.integers(3, 8))
        spec, mel = f"ljspeech-spec-{i + 1:05d}.npy", f"ljspeech-mel-{i + 1:05d}.npy"
        np.save(os.path.join(folder, spec), rng.random((frames, HP.num_freq), dtype=np.float32))
        np.save(os.path.join(folder, mel), rng.random((frames, HP.num_mels), dtype=np.float32))
        lines.append(f"{spec}|{mel}|{frames}|{text}\n")
    with open(os.path.join(folder, "train.txt"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    return folder


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("t1train")
    prefix = str(root / "ckpt" / "model.ckpt")
    os.makedirs(os.path.dirname(prefix))
    return {"ckpt": prefix, "tensors": _checkpoint(prefix), "data": _data(str(root / "data")), "root": root}


def _hand_batch() -> dict:
    """No symbol twice and no padding: TF1's IndexedSlices norm equals the dense one (the re-statement's case)."""
    rng = np.random.default_rng(5)
    return {"inputs": np.array([[20, 21, 22, 23], [24, 25, 26, 27]], np.int32),
            "input_lengths": np.array([4, 4], np.int32),
            "mel_targets": rng.random((2, 6, HP.num_mels), dtype=np.float32),
            "linear_targets": rng.random((2, 6, HP.num_freq), dtype=np.float32)}


def _two_steps(trainer_cls, ckpt: str) -> tuple:
    trainer = trainer_cls.load(ckpt, "tf1")
    params = trainer.trainable()
    state = read_tf1_adam_state(ckpt, params, {}, trainer.hparams)
    batch, log = _hand_batch(), []
    for _ in range(2):
        log.append(train_step(trainer, params, state, batch, dropout_masks(batch, trainer.hparams, 0,
                                                                            state.global_step)))
    return trainer, state, log


@pytest.fixture(scope="module")
def trained(files):
    from tf_layers.tacotron1_trainer import Tacotron1Trainer as KerasTrainer
    from torch_layers.tacotron1_trainer import Tacotron1Trainer as TorchTrainer

    return {"torch": _two_steps(TorchTrainer, files["ckpt"]), "keras": _two_steps(KerasTrainer, files["ckpt"])}


def _restated(files) -> tuple[dict, list]:
    """float64: clip_by_global_norm(1.0) + TF1 Adam on torch's ``tf1_loss_and_gradients``, from the checkpoint's
    slots and beta powers, lr = keithito's warm-up at the global step before each update."""
    import torch

    from torch_layers import Tacotron1

    model = Tacotron1.from_tf1_checkpoint(files["ckpt"])
    t = files["tensors"]
    weights = {k: np.asarray(v, np.float64) for k, v in model.tf1_weights().items()}
    names = sorted(k for k in weights if "moving_" not in k)
    m = {k: t[f"model/optimizer/model/inference/{k}/Adam"].astype(np.float64) for k in names}
    v = {k: t[f"model/optimizer/model/inference/{k}/Adam_1"].astype(np.float64) for k in names}
    b1p, b2p = float(np.float32(POWERS[0])), float(np.float32(POWERS[1]))
    batch, losses = _hand_batch(), []
    for step in (STEP, STEP + 1):
        masks = {k: [torch.as_tensor(a) for a in x] for k, x in dropout_masks(batch, HP, 0, step).items()}
        loss, grads = model.tf1_loss_and_gradients(torch.as_tensor(batch["inputs"]).long(),
                                                   torch.as_tensor(batch["input_lengths"]).long(),
                                                   torch.as_tensor(batch["mel_targets"]),
                                                   torch.as_tensor(batch["linear_targets"]), masks)
        norm = np.sqrt(sum(np.sum(np.square(grads[k].astype(np.float64))) for k in names))
        lr = 0.002 * 4000 ** 0.5 * min((step + 1) * 4000 ** -1.5, (step + 1) ** -0.5)
        alpha = lr * np.sqrt(1 - b2p) / (1 - b1p)
        for k in names:
            g = grads[k].astype(np.float64) * min(1.0, 1.0 / norm)
            m[k] = 0.9 * m[k] + 0.1 * g
            v[k] = 0.999 * v[k] + 0.001 * g * g
            weights[k] = weights[k] - alpha * m[k] / (np.sqrt(v[k]) + 1e-8)
        b1p, b2p = b1p * 0.9, b2p * 0.999
        losses.append((loss["loss"], lr, norm))
        model.load_tf1_weights({k: w.astype(np.float32) for k, w in weights.items()})
    return {k: weights[k] for k in names}, losses


def _max_rel(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(a[k] - b[k])) / max(np.max(np.abs(b[k])), 1e-12)) for k in b)


@pytest.mark.parametrize("framework", ["torch", "keras"])
def test_two_steps_equal_float64_tf1_adam(files, trained, framework):
    expected, steps = _restated(files)
    trainer, state, log = trained[framework]
    got = trainer.trainable()
    assert set(got) == set(expected)
    assert _max_rel(got, expected) < 1e-5  # measured 1.1e-7 (both frameworks)
    before = {k[len("model/inference/"):]: v for k, v in files["tensors"].items() if k.startswith("model/inference/")}
    assert _max_rel(expected, {k: before[k] for k in expected}) > 1e-2  # the two updates are far above that
    assert state.global_step == STEP + 2
    assert state.beta1_power == np.float32(np.float32(np.float32(POWERS[0]) * np.float32(0.9)) * np.float32(0.9))
    for (losses, lr, norm), (loss, lr_ref, norm_ref) in zip(log, steps):
        assert losses["loss"] == pytest.approx(loss, rel=1e-5)
        assert lr == pytest.approx(lr_ref, rel=1e-12) and norm == pytest.approx(norm_ref, rel=1e-5)


def test_keras_and_torch_agree_after_two_steps(trained):
    keras_trainer, torch_trainer = trained["keras"][0], trained["torch"][0]
    assert _max_rel(keras_trainer.trainable(), torch_trainer.trainable()) < 1e-5
    k_all, t_all = keras_trainer.model.tf1_weights(), torch_trainer.model.tf1_weights()
    moving = [k for k in t_all if "moving_" in k]  # batch-norm statistics updated by both passes
    assert moving and _max_rel({k: k_all[k] for k in moving}, {k: t_all[k] for k in moving}) < 1e-5


@pytest.mark.parametrize("framework", ["torch", "keras"])
def test_embedding_rows_sum_to_the_dense_gradient(trained, files, framework):
    """The IndexedSlices rows (norm) of a batch with repeated ids and padding sum to the dense gradient."""
    trainer = trained[framework][0]
    examples = read_metadata(files["data"], trainer.hparams)
    batch = load_batch(examples[:3], trainer.hparams)
    _, grads, rows = trainer.gradients(batch, dropout_masks(batch, trainer.hparams, 1, 0))
    summed = np.zeros_like(grads["embedding"])
    np.add.at(summed, batch["inputs"].ravel(), rows["embedding"])
    np.testing.assert_allclose(summed, grads["embedding"], atol=1e-6)
    assert rows["embedding"].shape == (batch["inputs"].size, HP.embed_depth)


def test_optimizer_equals_tensorflow_v1_adam_on_indexed_slices():
    """TF's own clip_by_global_norm + v1 AdamOptimizer (eager) on an embedding lookup with repeated ids: the norm
    counts every looked-up row; the sparse and dense updates, the beta powers."""
    import tensorflow as tf

    rng = np.random.default_rng(1)
    table0, dense0 = rng.normal(size=(6, 3)).astype(np.float32), rng.normal(size=(3, 2)).astype(np.float32)
    table, dense = tf.Variable(table0), tf.Variable(dense0)
    ids, target = tf.constant([1, 1, 4, 1]), tf.constant(rng.normal(size=(4, 2)).astype(np.float32))
    opt = tf.compat.v1.train.AdamOptimizer(0.01, 0.9, 0.999)
    hp = resolve_tacotron1_hparams("keithito")
    params = {"embedding": table0.copy(), "dense": dense0.copy()}
    state = fresh_state(params, hp)
    for _ in range(3):
        with tf.GradientTape() as tape:
            out = tf.matmul(tf.gather(table, ids), dense)
            loss = tf.reduce_sum(tf.square(out - target)) * 3.0
        g_table, g_dense = tape.gradient(loss, [table, dense])
        clipped, tf_norm = tf.clip_by_global_norm([g_table, g_dense], 1.0)
        opt.apply_gradients(zip(clipped, [table, dense]))
        grads = {"embedding": tf.convert_to_tensor(g_table).numpy(), "dense": g_dense.numpy()}
        c, norm = clip_by_global_norm(grads, {"embedding": g_table.values.numpy()})
        apply_tf1_adam(params, c, state, 0.01, hp)
        assert norm == pytest.approx(float(tf_norm), rel=1e-6)
    np.testing.assert_allclose(params["embedding"], table.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(params["dense"], dense.numpy(), rtol=1e-6, atol=1e-7)
    assert state.beta1_power == np.float32(0.9) ** 4


@pytest.mark.parametrize("preset, step, expected", [
    ("keithito", STEP, 0.002 * 4000 ** 0.5 * min((STEP + 1) * 4000 ** -1.5, (STEP + 1) ** -0.5)),
    ("keithito", 877000, 0.002 * 4000 ** 0.5 * 877001 ** -0.5),
    ("mimic2", 150000, 0.0015 * 0.5 ** 1.5)])
def test_learning_rate_at_the_checkpoint_step(preset, step, expected):
    """The update uses lr at the global step before it (warm-up on global_step + 1, mimic2's exponential_decay),
    then counts the step."""
    hp = resolve_tacotron1_hparams(preset)
    params = {"w": np.ones(3, np.float32)}
    state = fresh_state(params, hp, step)
    lr, _ = tf1_update(params, {"w": np.full(3, 0.5, np.float32)}, {}, state, hp)
    assert lr == pytest.approx(expected, rel=1e-12)
    assert state.global_step == step + 1
    # first update: m = 0.1 g, v = 0.001 g^2 -> the step is lr exactly (up to epsilon), as TF1's bias correction
    np.testing.assert_allclose(params["w"], 1.0 - np.float32(expected), rtol=1e-6)


def test_mimic2_checkpoint_step_decays_the_rate(files, tmp_path):
    """A mimic2 checkpoint (location-sensitive layout, no Adam slots) at step 150000: one torch update at mimic2's
    exponential_decay rate of that step, a fresh Adam, the step counted."""
    from torch_layers.tacotron1_trainer import Tacotron1Trainer

    hp = resolve_tacotron1_hparams("mimic2", **{k: v for k, v in SIZES.items() if k != "embed_depth"},
                                   embedding_dim=5)
    prefix = str(tmp_path / "model.ckpt")
    _checkpoint(prefix, slots=False, hp=hp, layout="mimic2", step=150000)
    trainer = Tacotron1Trainer.load(prefix, "tf1")
    assert trainer.hparams.variant == "mimic2" and trainer.layout == "mimic2"
    params = trainer.trainable()
    state = read_tf1_adam_state(prefix, params, {}, trainer.hparams)
    batch = load_batch(read_metadata(files["data"], trainer.hparams)[:2], trainer.hparams)
    _, lr, _ = train_step(trainer, params, state, batch, dropout_masks(batch, trainer.hparams, 0, 150000))
    assert lr == pytest.approx(0.0015 * 0.5 ** 1.5, rel=1e-12)
    assert state.global_step == 150001 and state.beta1_power == np.float32(0.9) * np.float32(0.9)


def test_tf1_state_read_from_the_checkpoint(files):
    params = {k[len("model/inference/"):]: v for k, v in files["tensors"].items()
              if k.startswith("model/inference/") and "moving_" not in k}
    state = read_tf1_adam_state(files["ckpt"], params, {}, HP)
    assert isinstance(state, AdamState) and state.global_step == STEP
    assert state.beta1_power == np.float32(POWERS[0]) and state.beta2_power == np.float32(POWERS[1])
    m, v = state.slots["embedding"]
    assert np.array_equal(v, files["tensors"]["model/optimizer/model/inference/embedding/Adam_1"])
    bare = str(files["root"] / "bare")
    _write_tf1_checkpoint(bare, {k: v for k, v in files["tensors"].items() if "optimizer" not in k})
    fresh = read_tf1_adam_state(bare, params, {}, HP)  # no slots: a fresh Adam at the checkpoint's step
    assert fresh.global_step == STEP and fresh.beta1_power == np.float32(0.9)
    assert not np.any(fresh.slots["embedding"][0])


def test_feeder_batch_padding(files):
    """keithito's _prepare_batch: ids padded with 0; targets padded with 0 to round_up(longest + 1, r)."""
    examples = read_metadata(files["data"], HP)
    batch = load_batch(examples[:3], HP)
    longest = max(e.frames for e in examples[:3])
    assert batch["mel_targets"].shape[1] == longest + 1 + (longest + 1) % 2
    assert batch["linear_targets"].shape[1] == batch["mel_targets"].shape[1]
    for row, e in enumerate(examples[:3]):
        assert list(batch["inputs"][row, :len(e.ids)]) == list(e.ids) and not batch["inputs"][row, len(e.ids):].any()
        assert not batch["mel_targets"][row, e.frames:].any()
        np.testing.assert_array_equal(batch["mel_targets"][row, :e.frames], np.load(e.mel))
    assert examples[4].ids[-1] == 1 and 149 > max(examples[4].ids) > 60  # EOS; the ARPAbet group's @ symbols


def _weights(path: str) -> dict:
    from torch_layers import Tacotron1

    return Tacotron1.from_migrated(path).tf1_weights()


def test_cli_end_to_end_and_resume_equals_uninterrupted(files, capsys):
    root, ckpt, data = files["root"], files["ckpt"], files["data"]
    straight = Tacotron1TrainOptions(data, str(root / "straight"), ckpt, "tf1", steps=3, batch_size=2,
                                     checkpoint_interval=100, progress=False)
    from torch_layers.tacotron1_trainer import Tacotron1Trainer

    expected = train_tacotron1(Tacotron1Trainer, straight)
    run = str(root / "cli")
    base = ["train", data, run, "--framework", "torch", "--quiet"]
    assert cli.main(base + ["--from", ckpt, "--steps", "2", "--batch-size", "2", "--checkpoint-interval", "1"]) == 0
    assert cli.main(base + ["--steps", "1"]) == 0  # resumes from the step-1236 checkpoint
    out = capsys.readouterr().out
    assert f"{run}: step {STEP + 3}, checkpoint" in out
    got = _weights(os.path.join(run, "checkpoints", f"tacotron1-{STEP + 3:08d}.pt"))
    want = _weights(expected.checkpoint)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    with open(os.path.join(run, "train.log")) as f:
        lines = f.read().splitlines()
    assert [ln.split(":")[0] for ln in lines] == [f"step {STEP + i}" for i in (1, 2, 3)]
    assert "lr=" in lines[0] and "grad_norm=" in lines[0] and "mel_loss=" in lines[0]


def test_cli_refusals(files, capsys):
    data, ckpt, root = files["data"], files["ckpt"], files["root"]
    assert cli.main(["train", data, str(root / "r1"), "--from", ckpt, "--steps", "1", "--hparams", "rtvc"]) == 2
    assert "Tacotron-2 preset" in capsys.readouterr().err
    assert cli.main(["train", data, str(root / "r2"), "--from", ckpt]) == 2
    assert "--steps" in capsys.readouterr().err
    assert cli.main(["train", data, str(root / "r3"), "--hparams", "keithito", "--steps", "1"]) == 2
    assert "needs --from" in capsys.readouterr().err
    assert not os.path.exists(root / "r1") and not os.path.exists(root / "r3")
    run = str(root / "cli")  # the run of test_cli_end_to_end_and_resume_equals_uninterrupted (or none yet)
    if os.path.exists(run):
        assert cli.main(["train", data, run, "--steps", "1", "--set", "max_iters=20"]) == 2
        assert "without --hparams/--set" in capsys.readouterr().err


# -- opt-in: keithito's own training graph (TF1, legacy subprocess) ------------------------------------------------
_TF1_TRAIN = r'''
import json, sys
import numpy as np
import tensorflow as tf
from parity_tests.legacy.tf1_tacotron1 import tacotron1, tacotron1_loss
from speechblocks import resolve_tacotron1_hparams

v1 = tf.compat.v1
spec = json.loads(sys.argv[1])
arrays = dict(np.load(spec["arrays"]))
hp = resolve_tacotron1_hparams(spec["hparams"])
graph = tf.Graph()
with graph.as_default():
    shapes = {"inputs": [None, None], "input_lengths": [None], "mel_targets": [None, None, hp.num_mels],
              "linear_targets": [None, None, hp.num_freq]}
    ph = {k: v1.placeholder(tf.int32 if "input" in k else tf.float32, s) for k, s in shapes.items()}
    noise = {g: [v1.placeholder(tf.float32, [None, None, d]) for d in hp.prenet_depths]
             for g in ("encoder_prenet", "decoder_prenet")}
    global_step = tf.Variable(0, name="global_step", trainable=False, dtype=tf.int64)
    with v1.variable_scope("model"):
        with v1.variable_scope("inference"):
            out = tacotron1(hp, spec["layout"], ph["inputs"], ph["input_lengths"], True, ph["mel_targets"],
                            noise=noise)
        loss = tacotron1_loss(hp, out, ph["mel_targets"], ph["linear_targets"])["loss"]
        with v1.variable_scope("optimizer"):  # keithito's add_optimizer
            step = tf.cast(global_step + 1, tf.float32)
            lr = hp.initial_learning_rate * 4000.0 ** 0.5 * tf.minimum(step * 4000.0 ** -1.5, step ** -0.5)
            opt = v1.train.AdamOptimizer(lr, hp.adam_beta1, hp.adam_beta2)
            grads, variables = zip(*opt.compute_gradients(loss))
            clipped, norm = tf.clip_by_global_norm(grads, 1.0)
            with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
                optimize = opt.apply_gradients(zip(clipped, variables), global_step=global_step)
    config = v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True  # as the legacy runner: the ops as built
    with v1.Session(graph=graph, config=config) as sess:
        v1.train.Saver().restore(sess, spec["checkpoint"])  # every variable: the slot names are TF's own
        log = []
        for i in range(spec["steps"]):
            feed = {ph[k]: arrays[f"{i}/{k}"] for k in ph}
            feed.update({p: arrays[f"{i}/{g}/{j}"] for g, ps in noise.items() for j, p in enumerate(ps)})
            log.append([float(x) for x in sess.run([loss, norm, lr, optimize], feed)[:3]])
        values = {v.op.name: sess.run(v) for v in v1.global_variables()}
np.savez(spec["out"], **values)
print(json.dumps(log))
'''


_REFERENCE_ROWS = ([0, 2, 4], [1, 3, 0])  # train.txt rows of the two batches: repeated symbols, padding


def _reference_batches(files):
    examples = read_metadata(files["data"], HP)
    for i, rows in enumerate(_REFERENCE_ROWS):
        batch = load_batch([examples[j] for j in rows], HP)
        yield batch, dropout_masks(batch, HP, 0, STEP + i)


@pytest.fixture(scope="module")
def tf1_reference(files):
    """Two steps of keithito's training graph in a TF1 subprocess: ``(values by TF1 name, [(loss, norm, lr)])``."""
    import json
    import subprocess
    import sys

    root, arrays = files["root"], {}
    for i, (batch, masks) in enumerate(_reference_batches(files)):
        arrays.update({f"{i}/{k}": v for k, v in batch.items()})
        arrays.update({f"{i}/{g}/{j}": m for g, ms in masks.items() for j, m in enumerate(ms)})
    np.savez(root / "tf1_arrays.npz", **arrays)
    spec = {"arrays": str(root / "tf1_arrays.npz"), "hparams": HP.to_dict(), "layout": LAYOUT,
            "steps": len(_REFERENCE_ROWS), "checkpoint": files["ckpt"], "out": str(root / "tf1_values.npz")}
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", CUDA_VISIBLE_DEVICES="", PYTHONPATH=repo)
    done = subprocess.run([sys.executable, "-c", _TF1_TRAIN, json.dumps(spec)], env=env, cwd=repo,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(root / "tf1_values.npz")), json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(os.environ.get("SPEECHBLOCKS_TF1_TRAIN") != "1",
                    reason="set SPEECHBLOCKS_TF1_TRAIN=1: keithito's training graph in a TF1 subprocess (minutes)")
@pytest.mark.parametrize("framework", ["torch", "keras"])
def test_two_steps_equal_keithitos_tf1_training_graph(files, tf1_reference, framework):
    """Two steps of keithito's own add_optimizer graph (AdamOptimizer, clip_by_global_norm, UPDATE_OPS,
    global_step) on batches of the data folder (repeated symbols and padding: IndexedSlices), restored from the
    checkpoint (its slot names must be TF's own) = the trainer's weights, slots, beta powers, BN statistics.
    Measured here: trainables 6.7e-9, BN statistics 9.2e-7 (torch) / 2.1e-7 (Keras), slots 3.0e-7 / 2.0e-7."""
    if framework == "torch":
        from torch_layers.tacotron1_trainer import Tacotron1Trainer
    else:
        from tf_layers.tacotron1_trainer import Tacotron1Trainer
    tf1, tf1_log = tf1_reference
    trainer = Tacotron1Trainer.load(files["ckpt"], "tf1")
    params = trainer.trainable()
    state = read_tf1_adam_state(files["ckpt"], params, {}, trainer.hparams)
    log = [train_step(trainer, params, state, batch, masks) for batch, masks in _reference_batches(files)]
    for (losses, lr, norm), (loss_ref, norm_ref, lr_ref) in zip(log, tf1_log):
        assert losses["loss"] == pytest.approx(loss_ref, rel=1e-5) and norm == pytest.approx(norm_ref, rel=1e-5)
        assert lr == pytest.approx(lr_ref, rel=1e-6)
    weights = trainer.model.tf1_weights()
    assert _max_rel(weights, {k: tf1[f"model/inference/{k}"] for k in weights}) < 1e-5
    slots = {f"{k}/{s}": a for k, pair in state.slots.items() for s, a in zip(("Adam", "Adam_1"), pair)}
    assert _max_rel(slots, {k: tf1[f"model/optimizer/model/inference/{k}"] for k in slots}) < 1e-5
    assert state.beta1_power == tf1["model/optimizer/beta1_power"] and int(tf1["global_step"]) == STEP + 2
