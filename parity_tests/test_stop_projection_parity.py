from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import stop_projection


def test_stop_projection_parity():
    assert_case_passes(stop_projection)
