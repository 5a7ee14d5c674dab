from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import location_sensitive_attention


def test_location_sensitive_attention_parity():
    assert_case_passes(location_sensitive_attention)
