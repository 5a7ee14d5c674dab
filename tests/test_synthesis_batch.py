"""Batched synthesis with per-sentence stop, from a real TF1 checkpoint, in both frameworks: each sentence stops at
the step the weights were designed for (``bench._batch_timing.stop_design``, the batched-synthesis bench's
workload) and equals that sentence synthesized alone; Keras and torch agree."""
import numpy as np
import pytest

from bench._batch_timing import compare_alone, sentences, stop_design
from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables

LENGTHS = (9, 3, 6, 12, 5)
STEPS = [7, 2, 5, 10, 4]  # designed stop steps, not in the lengths' order: each sentence its own
HORIZON = 12
KEYS = ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments")


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    hp, variables = small_variables("rtvc", seed=3)
    weights, spk, margin = stop_design(variables, hp, STEPS, HORIZON)
    assert margin > 1e-3  # the counter's distance to every threshold: float rounding cannot move a stop
    path = save_model_checkpoint(tmp_path_factory.mktemp("ckpt"), weights)
    return path, sentences(LENGTHS, hp.n_symbols), spk


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

    path, seqs, spk = case
    models = Tacotron2.from_tf1_checkpoint(path), Tacotron2.from_tf1_checkpoint(path, tacotron_dropout_rate=0.0)

    def alone(m, s, e):
        return {k: v[0] for k, v in m.synthesize(s[None], np.array([len(s)], np.int32), e).items()}

    return _run(models, seqs, spk, lambda m, ids, n, e: m.synthesize(ids, n, e), alone)


def test_keras_each_sentence_stops_at_its_step_and_equals_alone(keras_results):
    _check(*keras_results)


def test_torch_each_sentence_stops_at_its_step_and_equals_alone_and_keras(case, keras_results):
    import torch

    from torch_layers import Tacotron2

    path, seqs, spk = case
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
