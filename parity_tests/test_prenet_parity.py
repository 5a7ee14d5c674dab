from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import prenet


def test_prenet_parity():
    assert_case_passes(prenet)
