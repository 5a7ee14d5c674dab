"""Errors a person can read: a contradiction between the hparams and a checkpoint is one short line that names the
cause first; the full list is the exception's ``problems`` (``--debug`` prints it)."""
from __future__ import annotations

import pytest

from speechblocks.cli import main
from speechblocks.tacotron2_schema import HParamsMismatchError, checkpoint_hparams
from tests.helpers.tacotron2_checkpoint import save_model_checkpoint, small_variables


@pytest.fixture(scope="module")
def rayhane_checkpoint(tmp_path_factory):
    _, variables = small_variables("rayhane")
    return save_model_checkpoint(tmp_path_factory.mktemp("ray"), variables), variables


def test_a_post_cbhg_the_hparams_leave_out_is_named_in_one_line(rayhane_checkpoint, tmp_path, capsys):
    prefix, variables = rayhane_checkpoint
    n_post = sum(k.startswith(("CBHG_postnet/", "cbhg_linear_specs_projection/")) for k in variables)
    assert main(["migrate", prefix, "--to", "torch", str(tmp_path / "x.pt"), "--set", "predict_linear=false"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and len(err.split("error: ", 1)[1].replace(prefix, "CKPT")) < 300, err
    assert (f"the hparams say predict_linear=False, but the checkpoint holds the post-CBHG ({n_post} variables under "
            "CBHG_postnet/ and cbhg_linear_specs_projection/): drop --hparams or --set predict_linear=true") in err
    assert not (tmp_path / "x.pt").exists()


def test_the_full_list_is_on_the_exception_and_under_debug(rayhane_checkpoint, tmp_path, capsys):
    prefix, variables = rayhane_checkpoint
    shapes = {k: v.shape for k, v in variables.items()}
    with pytest.raises(HParamsMismatchError) as err:
        checkpoint_hparams(shapes, None, {"decoder_lstm_units": 8}, source="ckpt")
    e = err.value
    assert str(e).startswith("the hparams contradict ckpt: the hparams say decoder_lstm_units=8 where the shapes "
                             "say 16")
    # every variable the 8 units reshape: the 2 LSTM kernels and biases, the projections fed by the LSTM, ...
    assert len(e.problems) == e.details().count("\n  - ") + 1 >= 6
    assert all("decoder" in p for p in e.problems)
    with pytest.raises(ValueError):
        main(["migrate", prefix, "--to", "torch", str(tmp_path / "y.pt"), "--set", "decoder_lstm_units=8", "--debug"])
    listed = capsys.readouterr().err
    assert listed.count("\n  - ") >= len(e.problems) - 1
