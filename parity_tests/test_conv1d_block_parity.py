from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import conv1d_block


def test_conv1d_block_parity():
    assert_case_passes(conv1d_block)
