"""``tf_layers.SpeakerEncoder.embed_wav`` and ``from_torch_checkpoint`` against the independent float64 reference
of RTVC's ``embed_utterance(preprocess_wav(path))``, and against the torch twin. torch writes the random
checkpoints and runs the twin; the Keras layer reads the files without it."""
import numpy as np
import pytest

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
from tf_layers import SpeakerEncoder

WEIGHTS = ["rtvc_zip", "resemblyzer_legacy", "real"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("speaker_keras")
    out = dict(write_random_checkpoints(tmp))
    out["real"] = real_weights_path()
    out["synthetic"] = write_synthetic(tmp)
    out["flite"] = flite_speech(tmp)
    return out


@pytest.mark.parametrize("weights", WEIGHTS)
def test_embed_wav_equals_the_reference_and_torch(files, weights):
    if files[weights] is None:
        pytest.skip("no real GE2E weights ($SPEECHBLOCKS_GE2E_WEIGHTS or .venv/assets/resemblyzer/pretrained.pt)")
    torch_layers = pytest.importorskip("torch_layers")
    layer = SpeakerEncoder.from_torch_checkpoint(files[weights])
    twin = torch_layers.SpeakerEncoder.from_checkpoint(files[weights]).eval()
    state = read_torch_file(files[weights])["model_state"]
    # the torch tests run every audio on every weights; here the flite speech runs on the real weights only
    audio = [files["synthetic"]] + ([files["flite"]] if files["flite"] is not None and weights == "real" else [])
    for path in audio:
        ref, ref_partials, ref_slices = reference_embed_utterance(state, reference_preprocess(path))
        embed, partials, slices = layer.embed_wav(path, return_partials=True)
        assert isinstance(embed, np.ndarray) and embed.dtype == np.float32 and embed.shape == ref.shape
        assert [(s.start, s.stop) for s in slices] == ref_slices
        np.testing.assert_allclose(partials, ref_partials, rtol=0, atol=1e-5)
        np.testing.assert_allclose(embed, ref, rtol=0, atol=1e-5)
        np.testing.assert_allclose(embed, twin.embed_wav(path), rtol=0, atol=1e-5)
    if weights != "rtvc_zip":
        return
    whole = layer.embed_wav(synthetic_voice(), source_sr=22050, using_partials=False)
    ref_whole = reference_embed_utterance(state, reference_preprocess(files["synthetic"]), using_partials=False)[0]
    np.testing.assert_allclose(whole, ref_whole, rtol=0, atol=1e-5)


def test_from_torch_checkpoint_errors(files, tmp_path):
    (tmp_path / "x.pt").write_bytes(b"no torch file")
    with pytest.raises(ValueError, match="x.pt"):
        SpeakerEncoder.from_torch_checkpoint(tmp_path / "x.pt")
    with pytest.raises(FileNotFoundError):
        SpeakerEncoder.from_torch_checkpoint(tmp_path / "missing.pt")
    layer = SpeakerEncoder.from_torch_checkpoint(files["resemblyzer_legacy"])
    assert (layer.mel_n_channels, layer.model_hidden_size, layer.model_num_layers) == (40, 24, 2)
    with pytest.raises(ValueError, match="source_sr"):
        layer.embed_wav(synthetic_voice(), source_sr=22050.0)
    with pytest.raises(ValueError, match="wav_or_path"):
        layer.embed_wav(np.full(20_000, np.nan, dtype=np.float32))
