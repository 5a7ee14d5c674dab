from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import nonfinite_inputs


def test_nonfinite_inputs_parity():
    assert_case_passes(nonfinite_inputs)
