from parity_tests._pytest_support import assert_rows_pass
from parity_tests.cases import tacotron1
from parity_tests.reference import run_legacy


def test_tacotron1_parity():
    # one test, one run_legacy call: tacotron1.TEST_CASES (each layout once, each mode once; every case of
    # tacotron1.CASES runs in `make parity`); one test rather than one per case so that one worker builds the graphs
    specs = tacotron1.legacy_specs()
    cases = [tacotron1.CASES[i] for i in tacotron1.TEST_CASES]
    assert_rows_pass(tacotron1.rows(run_legacy([specs[i] for i in tacotron1.TEST_CASES]), cases), "tacotron1")
