"""Batched synthesis with per-sentence stop, from a real TF1 checkpoint, in both frameworks: each sentence stops at
the step the weights were designed for (``bench._batch_timing.stop_design``, the batched-synthesis bench's
workload) and equals that sentence synthesized alone; Keras and torch agree. The loop drops each sentence at its
stop: designs where sentences leave at very different steps, all at the same step, or where ``max_iters`` cuts
some or all of them."""
import numpy as np
import pytest

from bench._batch_timing import compare_alone, sentences, stop_design
from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables

LENGTHS = (9, 3, 6, 12, 5)
STEPS = [7, 2, 5, 10, 4]  # designed stop steps, not in the lengths' order: each sentence its own
HORIZON = 12
KEYS = ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments")
# more designs on the same weights (stop_design's weights do not depend on the steps, only the speaker embeddings
# do): designed stop steps and max_iters (None: the model's)
DESIGNS = {
    "spread": ([2, 12, 2, 9, 3], None),  # rows leave at very different steps, two at once, one runs on alone
    "same": ([6, 6, 6, 6, 6], None),  # every row stops at the same step: none leaves early
    "cut": ([8, 11, 12, 9, 10], 5),  # max_iters cuts every row
    "partly_cut": (STEPS, 6),  # max_iters cuts two rows, the others stop before
}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    hp, variables = small_variables("rtvc", seed=3)
    weights, spk, margin = stop_design(variables, hp, STEPS, HORIZON)
    assert margin > 1e-3  # the counter's distance to every threshold: float rounding cannot move a stop
    path = save_model_checkpoint(tmp_path_factory.mktemp("ckpt"), weights)
    designs = {}
    for name, (steps, max_iters) in DESIGNS.items():
        same_weights, design_spk, margin = stop_design(variables, hp, steps, HORIZON)
        assert margin > 1e-3 and all(np.array_equal(same_weights[k], weights[k]) for k in weights)
        designs[name] = (steps, max_iters, design_spk)
    return path, sentences(LENGTHS, hp.n_symbols), spk, designs


def _padded(seqs):
    ids = np.zeros((len(seqs), max(LENGTHS)), np.int32)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
    return ids, np.array(LENGTHS, np.int32)


def _run(models, seqs, spk, whole, alone):
    """The model as given (prenet dropout on): the padded batch by the original rule -- each row's own first stop
    (its probability rounds to 1, ``stop_at_any``) and the batch's step count; its dropout-0 twin: the batched
    results and each sentence alone."""
    model, twin = models
    stop = np.asarray(whole(model, *_padded(seqs), spk)["stop_token_prediction"]).reshape(len(seqs), -1, 2)
    fired = (np.round(stop) == 1).any(-1)
    rows = [int(np.argmax(f)) + 1 if f.any() else None for f in fired]
    batched = twin.synthesize_batch(seqs, spk)
    return rows, stop.shape[1], batched, [alone(twin, s, spk[i:i + 1]) for i, s in enumerate(seqs)]


def _check(rows, whole_steps, batched, each):
    assert rows == STEPS  # with dropout on, each sentence's own stop is where it was designed
    assert whole_steps == max(STEPS)  # the probability only rises: the original rule stops at the longest
    assert [(o["alignments"].shape[1], o["stopped"]) for o in batched] == [(s, True) for s in STEPS]
    worst, bad = compare_alone(batched, each)
    assert not bad and worst <= 1e-5, (worst, bad)
    for s, out in zip(STEPS, batched):
        assert out["mel_outputs"].shape == (2 * s, 10) and out["stop_token_prediction"].shape == (2 * s,)


@pytest.fixture(scope="module")
def keras_results(case):
    from tf_layers import Tacotron2

    path, seqs, spk, _ = case
    models = Tacotron2.from_tf1_checkpoint(path), Tacotron2.from_tf1_checkpoint(path, tacotron_dropout_rate=0.0)

    def alone(m, s, e):
        return {k: v[0] for k, v in m.synthesize(s[None], np.array([len(s)], np.int32), e).items()}

    return _run(models, seqs, spk, lambda m, ids, n, e: m.synthesize(ids, n, e), alone)


def test_keras_each_sentence_stops_at_its_step_and_equals_alone(keras_results):
    _check(*keras_results)


def test_torch_each_sentence_stops_at_its_step_and_equals_alone_and_keras(case, keras_results):
    import torch

    from torch_layers import Tacotron2

    path, seqs, spk, _ = case
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        models = (Tacotron2.from_tf1_checkpoint(path).eval(),
                  Tacotron2.from_tf1_checkpoint(path, tacotron_dropout_rate=0.0).eval())

        def alone(m, s, e):
            out = m.synthesize(torch.from_numpy(s[None].astype(np.int64)), torch.tensor([len(s)]), e)
            return {k: v[0].numpy() for k, v in out.items()}

        def whole(m, ids, n, e):
            return m.synthesize(torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(n), torch.from_numpy(e))

        results = _run(models, seqs, spk, whole, alone)
    finally:
        torch.set_num_threads(threads)
    _check(*results)
    for got, want in zip(results[2], keras_results[2]):
        for k in KEYS:
            np.testing.assert_allclose(got[k], want[k], atol=1e-4, rtol=0, err_msg=k)


@pytest.fixture(scope="module")
def deterministic(case):
    """Per framework: ``(model with dropout 0, synthesize_batch(seqs, spk, max_iters), alone(i, seq, spk, max_iters)
    -> dict of numpy arrays)``."""
    path = case[0]

    def keras():
        from tf_layers import Tacotron2

        model = Tacotron2.from_tf1_checkpoint(path, tacotron_dropout_rate=0.0)

        def alone(s, e, max_iters):
            out = model.synthesize(s[None], np.array([len(s)], np.int32), e, max_iters)
            return {k: np.asarray(v)[0] for k, v in out.items()}

        return model.synthesize_batch, alone

    def torch_():
        import torch

        from torch_layers import Tacotron2

        model = Tacotron2.from_tf1_checkpoint(path, tacotron_dropout_rate=0.0).eval()

        def alone(s, e, max_iters):
            out = model.synthesize(torch.from_numpy(s[None].astype(np.int64)), torch.tensor([len(s)]),
                                   torch.from_numpy(e), max_iters)
            return {k: v[0].numpy() for k, v in out.items()}

        return model.synthesize_batch, alone

    return {"keras": keras(), "torch": torch_()}


@pytest.mark.parametrize("framework", ["keras", "torch"])
@pytest.mark.parametrize("design", list(DESIGNS))
def test_rows_leaving_the_loop_at_their_own_steps_equal_each_sentence_alone(case, deterministic, design, framework):
    import torch

    _, seqs, _, designs = case
    steps, max_iters, spk = designs[design]
    batch, alone = deterministic[framework]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        calls = []
        batched = batch(seqs, spk, max_iters, progress=lambda step, p: calls.append(step))
        plain = batch(seqs, spk, max_iters)  # the compiled loop (torch: scripted; the progress path runs Python)
        each = [alone(s, spk[i:i + 1], max_iters) for i, s in enumerate(seqs)]
    finally:
        torch.set_num_threads(threads)
    cap = max_iters or max(steps)
    want = [min(s, cap) for s in steps]
    assert [(o["alignments"].shape[1], o["stopped"]) for o in batched] == [(w, s <= cap) for w, s in zip(want, steps)]
    assert [o["alignments"].shape[1] for o in each] == want  # alone, each stops (or is cut) at the same step
    assert calls == list(range(1, max(want) + 1))
    worst, bad = compare_alone(batched, each)
    assert not bad and worst <= 1e-5, (worst, bad)
    worst, bad = compare_alone(plain, batched)
    assert not bad and worst <= 1e-6, (worst, bad)


def test_torch_a_row_leaves_the_loop_at_its_stop(case):
    """The decoder's raw outputs under ``stop_each``: each row's stop probabilities and alignments are zeros after
    its own stop step (it left the loop), nonzero up to it; the scripted loop and the Python one (progress) agree."""
    import torch

    from torch_layers import Tacotron2

    path, seqs, _, designs = case
    steps, _, spk = designs["spread"]
    model = Tacotron2.from_tf1_checkpoint(path, tacotron_dropout_rate=0.0).eval()
    ids = torch.zeros(len(seqs), max(LENGTHS), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.from_numpy(s.astype(np.int64))
    lengths = torch.tensor(LENGTHS)
    with torch.no_grad():
        memory = model._memory(ids, lengths, torch.from_numpy(spk), None, None)
        out = model.decoder.decode(memory, lengths, stop_each=True)
        reported = model.decoder.decode(memory, lengths, progress=lambda step, p: None, stop_each=True)
    stop, alignments = out[1].reshape(len(seqs), -1, 2), out[2]
    assert stop.shape[1] == max(steps)
    for k, s in enumerate(steps):
        assert bool((stop[k, :s] > 0).all()) and not stop[k, s:].any() and not alignments[k, :, s:].any()
        assert bool((alignments[k, :, :s].sum(0) > 0.99).all())
    for a, b in zip(out, reported):
        assert torch.equal(a, b)


def test_keras_a_row_leaves_the_loop_at_its_stop(case):
    """The Keras decoder's raw outputs under ``stop_each`` (a static batch: the loop's shape invariants let the rows
    shrink): each row's frames, stop probabilities and alignments are zeros after its own stop step."""
    import tensorflow as tf

    from tf_layers import Tacotron2

    path, seqs, _, designs = case
    steps, _, spk = designs["spread"]
    model = Tacotron2.from_tf1_checkpoint(path, tacotron_dropout_rate=0.0)
    memory = tf.concat([tf.pad(model._memory(s[None], np.array([len(s)], np.int32), spk[i:i + 1], False, {}),
                               [[0, 0], [0, max(LENGTHS) - len(s)], [0, 0]]) for i, s in enumerate(seqs)], 0)

    @tf.function
    def decode(memory, lengths):
        return model.decoder.decode(memory, lengths, max_iters=HORIZON + 5, training=False, stop_each=True)

    frames, stop, alignments = (x.numpy() for x in decode(memory, tf.constant(LENGTHS, tf.int32)))
    assert memory.shape[0] == len(seqs) and stop.shape[1] == max(steps)
    for k, s in enumerate(steps):
        assert (stop[k, :s] > 0).all() and not stop[k, s:].any() and not alignments[k, :, s:].any()
        assert not frames[k, s:].any() and (alignments[k, :, :s].sum(0) > 0.99).all()
