from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import decoder_rnn, encoder_rnn, zoneout_lstm_cell
from parity_tests.reference import run_legacy


def test_decoder_rnn_parity():
    # the three recurrent case modules share one legacy subprocess (results are memoised per process)
    run_legacy(zoneout_lstm_cell.legacy_specs() + encoder_rnn.legacy_specs() + decoder_rnn.legacy_specs())
    assert_case_passes(decoder_rnn)
