"""torch ``Tacotron2.synthesize`` (with ``progress``) and ``Tacotron2.synthesize_batch``; Keras agreement."""
import numpy as np
import pytest
import torch

from torch_layers import Tacotron2

# the cases of tests/test_tacotron2_synthesize_keras.py (kept here too: this file must not need TensorFlow)
SMALL = dict(embedding_dim=16, enc_conv_channels=16, enc_conv_kernel_size=3, encoder_lstm_units=8, attention_dim=8,
             attention_filters=4, attention_kernel=5, prenet_layers=[8, 8], decoder_layers=2, decoder_lstm_units=16,
             postnet_channels=16, postnet_num_layers=3, num_mels=6, max_iters=12, tacotron_dropout_rate=0.0)
PRESETS = {"rtvc": dict(SMALL, outputs_per_step=2, speaker_embedding_size=4),
           "rayhane": dict(SMALL, num_freq=9, cbhg_kernels=3, cbhg_conv_channels=4, cbhg_projection=8,
                           cbhg_highwaynet_layers=1, cbhg_highway_units=8, cbhg_rnn_units=4)}
N_SYM = 20
STOP = "decoder/stop_token_projection/projection_stop_token_projection/"
# (weights seed, stop kernel scale, stop bias) -> each sentence's own stop step (None: never, within max_iters=12),
# every stop probability at least 0.02 away from 0.5 (the rounding never hinges on float noise)
CASES = {"rtvc": (14, 3.0, -1.5, [3, 5, 1]), "rayhane": (12, 3.0, -0.25, [None, 3, 6])}
LENGTHS = (7, 3, 5)


def case_weights(shapes, preset):
    """Random TF1 weights (sorted names: the same in both frameworks), 3 id sequences, speaker embeddings."""
    seed, scale, bias, steps = CASES[preset]
    g = np.random.default_rng(seed)
    w = {k: (0.4 * g.standard_normal(shapes[k]) if "moving_variance" not in k else g.uniform(0.5, 1.5, shapes[k]))
         .astype(np.float32) for k in sorted(shapes)}
    seqs = [g.integers(1, N_SYM, n) for n in LENGTHS]
    spk = g.standard_normal((3, 4)).astype(np.float32) if preset == "rtvc" else None
    w[STOP + "kernel"] = w[STOP + "kernel"] * scale
    w[STOP + "bias"] = np.full(w[STOP + "bias"].shape, bias, np.float32)
    return w, seqs, spk, steps


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _case(preset):
    model = Tacotron2(preset, n_symbols=N_SYM, **PRESETS[preset])
    w, seqs, spk, steps = case_weights({k: v.shape for k, v in model.tf1_weights().items()}, preset)
    model.load_tf1_weights(w)
    return model, w, seqs, spk, steps


@pytest.fixture(scope="module", params=["rtvc", "rayhane"])
def case(request):
    return _case(request.param)


def _padded(seqs):
    lengths = torch.tensor([len(s) for s in seqs])
    ids = torch.zeros(len(seqs), int(lengths.max()), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.as_tensor(s)
    return ids, lengths


def test_batch_equals_each_sentence_alone(case):
    model, _, seqs, spk, want_steps = case
    r, max_iters = model.outputs_per_step, model.max_iters
    model.train()  # synthesis runs in eval() and restores the mode
    calls = []
    results = model.synthesize_batch(seqs, spk, progress=lambda step, p: calls.append((step, p)))
    assert model.training
    for k, (seq, res) in enumerate(zip(seqs, results)):
        steps = want_steps[k] or max_iters
        assert res["stopped"] == (want_steps[k] is not None)
        assert res["mel_outputs"].shape == res["decoder_outputs"].shape == (steps * r, 6)
        assert res["stop_token_prediction"].shape == (steps * r,) and res["alignments"].shape == (len(seq), steps)
        assert all(isinstance(v, np.ndarray) for key, v in res.items() if key != "stopped")
        alone = model.synthesize(torch.as_tensor(seq)[None], torch.tensor([len(seq)]),
                                 None if spk is None else torch.as_tensor(spk[k:k + 1]))
        assert model.training and not alone["mel_outputs"].requires_grad
        assert alone["alignments"].shape == (1, len(seq), steps)  # alone, it stops at the same step
        for key in alone:
            np.testing.assert_allclose(res[key], alone[key][0].numpy(), atol=1e-5, rtol=0, err_msg=key)
    assert [s for s, _ in calls] == list(range(1, max(s or max_iters for s in want_steps) + 1))
    for step, p in calls:
        running = [res["stop_token_prediction"].reshape(-1, r)[step - 1] for res in results
                   if res["alignments"].shape[1] >= step]
        assert p >= np.max(running) and 0.0 <= p <= 1.0
    for got, res in zip(model.synthesize_batch(seqs, spk), results):  # without progress: the same
        for key in res:
            np.testing.assert_array_equal(got[key], res[key], err_msg=key)
    if spk is not None:  # one embedding for every sentence; tensors in, too
        one = model.synthesize_batch([torch.as_tensor(s) for s in seqs[:2]], torch.as_tensor(spk[0]))
        both = model.synthesize_batch(seqs[:2], np.stack([spk[0], spk[0]]))
        for a, b in zip(one, both):
            np.testing.assert_array_equal(a["mel_outputs"], b["mel_outputs"])
    model.eval()


def test_progress_reports_every_step_and_changes_nothing(case, monkeypatch):
    model, _, seqs, spk, _ = case
    ids, lengths = _padded(seqs)
    spk = None if spk is None else torch.as_tensor(spk)
    r = model.outputs_per_step
    plain = model.synthesize(ids, lengths, spk, max_iters=7)
    calls = []
    reported = model.synthesize(ids, lengths, spk, max_iters=7, progress=lambda step, p: calls.append((step, p)))
    for key in plain:
        assert torch.equal(reported[key], plain[key]), key
    steps = plain["alignments"].shape[-1]
    assert [s for s, _ in calls] == list(range(1, steps + 1))
    assert all(isinstance(s, int) and isinstance(p, float) for s, p in calls)
    want = plain["stop_token_prediction"].reshape(len(seqs), steps, r).amax(dim=(0, 2))
    assert torch.equal(torch.tensor([p for _, p in calls], dtype=torch.float32), want)
    # the scripted model (no progress there) still gives the same: bit-equal to the eager call through the same
    # loops (eager inference runs the native encoder scan, another summation order: within float rounding of it)
    scripted = torch.jit.script(model.eval())
    with torch.no_grad():
        out = scripted(ids, lengths, spk, None, 7)
    for key in plain:
        torch.testing.assert_close(out[key], plain[key], atol=1e-5, rtol=0, msg=key)
    monkeypatch.setenv("SPEECHBLOCKS_NATIVE", "0")
    same_loops = model.synthesize(ids, lengths, spk, max_iters=7)
    for key in plain:
        assert torch.equal(out[key], same_loops[key]), key


def test_progress_errors_and_callback_exceptions():
    model = Tacotron2("rayhane", n_symbols=N_SYM, **dict(PRESETS["rayhane"], max_iters=6))
    with torch.no_grad():
        model.decoder.stop_projection.dense.bias.fill_(-30.0)  # never stops: every run is max_iters steps
    ids = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match="progress"):
        model.synthesize(ids, progress="yes")
    with pytest.raises(ValueError, match="mel_targets"):
        model.synthesize(ids, mel_targets=torch.zeros(1, 4, 6), progress=print)

    def cancel(step, p):
        if step == 2:
            raise KeyboardInterrupt("cancelled")

    model.train()
    with pytest.raises(KeyboardInterrupt, match="cancelled"):
        model.synthesize(ids, progress=cancel)
    assert model.training  # restored after the exception
    calls = []
    out = model.synthesize(ids, max_iters=3, progress=lambda *a: calls.append(a))
    assert [s for s, _ in calls] == [1, 2, 3] and out["alignments"].shape == (1, 3, 3)
    gta = model.synthesize(ids.numpy(), mel_targets=np.zeros((1, 4, 6), np.float32))  # arrays in, GTA
    assert gta["alignments"].shape == (1, 3, 4)


def test_synthesize_batch_bad_arguments():
    model = Tacotron2("rtvc", n_symbols=N_SYM, **PRESETS["rtvc"])
    spk = np.zeros((2, 4), np.float32)
    cases = [
        (dict(sequences=[]), "sequences"),
        (dict(sequences="abc"), "sequences"),
        (dict(sequences=[[1, 2], []]), r"sequences\[1\]"),
        (dict(sequences=[[1, 2], [0.5, 1.0]]), r"sequences\[1\]"),
        (dict(sequences=[[1, 2], [[1, 2]]]), r"sequences\[1\]"),
        (dict(sequences=[[1, 2], [3, N_SYM]]), "inputs"),
        (dict(speaker_embeddings=np.zeros((3, 4), np.float32)), "speaker_embeddings"),
        (dict(speaker_embeddings=np.zeros((2, 5), np.float32)), "speaker_embeddings"),
        (dict(speaker_embeddings=None), "speaker_embeddings"),
        (dict(max_iters=0), "max_iters"),
        (dict(progress=3), "progress"),
    ]
    for change, match in cases:
        args = dict(sequences=[[1, 2, 3], [4]], speaker_embeddings=spk)
        args.update(change)
        with pytest.raises(ValueError, match=match):
            model.synthesize_batch(**args)


@pytest.mark.parametrize("preset", ["rtvc", "rayhane"])
def test_keras_and_torch_agree(preset):
    pytest.importorskip("tensorflow")
    import tf_layers

    model, w, seqs, spk, _ = _case(preset)
    keras_model = tf_layers.Tacotron2(preset, n_symbols=N_SYM, **PRESETS[preset])
    keras_model.load_tf1_weights(w)
    got, want = model.synthesize_batch(seqs, spk), keras_model.synthesize_batch(seqs, spk)
    for a, b in zip(got, want):
        assert a.keys() == b.keys() and a["stopped"] == b["stopped"]
        for key in a:
            np.testing.assert_allclose(a[key], b[key], atol=1e-5, rtol=0, err_msg=key)
