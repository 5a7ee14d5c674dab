from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import speaker_encoder


def test_speaker_encoder_parity():
    assert_case_passes(speaker_encoder)
