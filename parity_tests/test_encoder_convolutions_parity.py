from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import encoder_convolutions


def test_encoder_convolutions_parity():
    assert_case_passes(encoder_convolutions)
