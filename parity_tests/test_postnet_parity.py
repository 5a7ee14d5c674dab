from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import postnet


def test_postnet_parity():
    assert_case_passes(postnet)
