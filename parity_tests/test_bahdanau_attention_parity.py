from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import bahdanau_attention


def test_bahdanau_attention_parity():
    assert_case_passes(bahdanau_attention)
