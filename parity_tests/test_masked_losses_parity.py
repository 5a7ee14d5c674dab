from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import masked_losses


def test_masked_losses_parity():
    assert_case_passes(masked_losses)
