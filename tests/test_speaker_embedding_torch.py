"""``torch_layers.SpeakerEncoder.embed_wav`` against the independent float64 reference of RTVC's
``embed_utterance(preprocess_wav(path))``; both checkpoint formats; the torch-free file reader."""
import os
import pickle

import numpy as np
import pytest
import torch

from speechblocks.torch_file import read_torch_file
from tests.helpers.speaker_reference import (
    flite_speech,
    real_weights_path,
    reference_embed_utterance,
    reference_preprocess,
    synthetic_voice,
    write_random_checkpoints,
    write_synthetic,
)
from torch_layers import SpeakerEncoder

WEIGHTS = ["rtvc_zip", "resemblyzer_legacy", "real"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("speaker")
    out = dict(write_random_checkpoints(tmp))
    out["real"] = real_weights_path()
    out["synthetic"] = write_synthetic(tmp)
    out["flite"] = flite_speech(tmp)
    return out


def _state(path):
    return {k: v.numpy() for k, v in torch.load(path, weights_only=True, map_location="cpu")["model_state"].items()}


@pytest.mark.parametrize("weights", WEIGHTS)
def test_embed_wav_equals_the_reference(files, weights):
    if files[weights] is None:
        pytest.skip("no real GE2E weights ($SPEECHBLOCKS_GE2E_WEIGHTS or .venv/assets/resemblyzer/pretrained.pt)")
    model = SpeakerEncoder.from_checkpoint(files[weights]).eval()
    state = _state(files[weights])
    audio = [files["synthetic"]] + ([files["flite"]] if files["flite"] is not None else [])
    for path in audio:
        ref, ref_partials, ref_slices = reference_embed_utterance(state, reference_preprocess(path))
        embed, partials, slices = model.embed_wav(path, return_partials=True)
        assert isinstance(embed, np.ndarray) and embed.dtype == np.float32
        assert embed.shape == (model.model_embedding_size,)
        assert [(s.start, s.stop) for s in slices] == ref_slices and len(ref_slices) >= 2
        np.testing.assert_allclose(partials, ref_partials, rtol=0, atol=1e-5)
        np.testing.assert_allclose(embed, ref, rtol=0, atol=1e-5)
        np.testing.assert_array_equal(model.embed_wav(path), embed)
    whole, none1, none2 = model.embed_wav(files["synthetic"], using_partials=False, return_partials=True)
    ref_whole = reference_embed_utterance(state, reference_preprocess(files["synthetic"]), using_partials=False)[0]
    assert none1 is None and none2 is None
    np.testing.assert_allclose(whole, ref_whole, rtol=0, atol=1e-5)
    if weights == "real" and files["flite"] is not None:  # the trained encoder knows a voice from another
        d = os.path.dirname(files["flite"])
        same = model.embed_wav(flite_speech(d, "Another sentence, read by the same voice as before.", name="b.wav"))
        other = model.embed_wav(flite_speech(d, "Another sentence, read by the same voice as before.", voice="kal",
                                             name="c.wav"))
        first = model.embed_wav(files["flite"])
        assert first @ same > 0.85 > 0.6 > first @ other


@pytest.mark.parametrize("n_samples", [480 * 20, 25_600, 31_999, 32_000, 44_800 + 77])
def test_embed_wav_pads_the_waveform_at_slice_boundaries(files, n_samples):
    """A preprocessed waveform (``preprocess=False``) shorter than one partial, exactly one, just below and on
    the 75 % coverage of the second, and three partials with a tail: the padding of the waveform decides."""
    model = SpeakerEncoder.from_checkpoint(files["rtvc_zip"]).eval()
    wav = np.resize(reference_preprocess(synthetic_voice(16000)), n_samples).astype(np.float32)
    ref, _, ref_slices = reference_embed_utterance(_state(files["rtvc_zip"]), wav)
    embed, _, slices = model.embed_wav(wav, preprocess=False, return_partials=True)
    assert [(s.start, s.stop) for s in slices] == ref_slices
    np.testing.assert_allclose(embed, ref, rtol=0, atol=1e-5)


def test_embed_wav_bad_input(files, tmp_path):
    model = SpeakerEncoder.from_checkpoint(files["rtvc_zip"])
    (tmp_path / "x.wav").write_bytes(b"RIFF0000WAVEjunk")
    for bad, name in ((tmp_path / "x.wav", "x.wav"), (np.array([np.nan] * 20_000), "wav_or_path"),
                      (np.zeros(20_000), "wav_or_path")):
        with pytest.raises(ValueError, match=name):
            model.embed_wav(bad)
    with pytest.raises(ValueError, match="source_sr"):
        model.embed_wav(synthetic_voice(), source_sr="22050")
    with pytest.raises(ValueError, match="wav_or_path"):
        model.embed_wav(np.zeros(100, dtype=np.float32), preprocess=False)
    with pytest.raises(ValueError, match="mel_n_channels"):
        SpeakerEncoder(mel_n_channels=8).embed_wav(synthetic_voice(), source_sr=22050)


def test_read_torch_file_equals_torch_load_and_refuses_code(files, tmp_path):
    for name in ("rtvc_zip", "resemblyzer_legacy"):
        ours = read_torch_file(files[name])
        ref = torch.load(files[name], weights_only=True)
        assert ours["step"] == ref["step"] == 1234
        assert sorted(ours["model_state"]) == sorted(ref["model_state"])
        for k, v in ref["model_state"].items():
            np.testing.assert_array_equal(ours["model_state"][k], v.numpy())
    odd = {"t": torch.arange(12.0).reshape(3, 4).t(), "h": torch.ones(2, dtype=torch.float16),
           "b": torch.tensor([1.5, -2.0]).bfloat16(), "i": torch.arange(3), "e": torch.zeros(0, 2)}
    torch.save(odd, tmp_path / "odd.pt")
    got = read_torch_file(tmp_path / "odd.pt")
    for k, v in odd.items():
        np.testing.assert_array_equal(got[k], v.float().numpy() if k == "b" else v.numpy())
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    with open(tmp_path / "evil.pt", "wb") as f:
        pickle.dump({"model_state": Payload()}, f, protocol=2)
    with pytest.raises(ValueError, match="refused"):
        read_torch_file(tmp_path / "evil.pt")
    assert not marker.exists()
    data = (tmp_path / "odd.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.pt"):
        read_torch_file(tmp_path / "cut.pt")
