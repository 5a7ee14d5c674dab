from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import gumbel_vector_quantizer


def test_gumbel_vector_quantizer_parity():
    assert_case_passes(gumbel_vector_quantizer)
