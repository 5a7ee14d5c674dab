from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import cbhg


def test_cbhg_parity():
    assert_case_passes(cbhg)
