from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import location_sensitive_attention, tacotron2
from parity_tests.reference import run_legacy


def test_tacotron2_parity():
    # the attention and the whole model share one legacy subprocess (results are memoised per process)
    run_legacy(location_sensitive_attention.legacy_specs() + tacotron2.legacy_specs())
    assert_case_passes(tacotron2)
