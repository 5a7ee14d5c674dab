from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import sequence_mask


def test_sequence_mask_parity():
    assert_case_passes(sequence_mask)
