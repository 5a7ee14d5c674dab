from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import tac


def test_tac_parity():
    assert_case_passes(tac)
