from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import mimic2_location_attention


def test_mimic2_location_attention_parity():
    assert_case_passes(mimic2_location_attention)
