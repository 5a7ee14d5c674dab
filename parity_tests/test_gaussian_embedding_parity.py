from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import gaussian_embedding


def test_gaussian_embedding_parity():
    assert_case_passes(gaussian_embedding)
