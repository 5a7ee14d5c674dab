import pytest

from parity_tests._pytest_support import assert_rows_pass
from parity_tests.cases import tacotron2
from parity_tests.reference import run_legacy


@pytest.mark.parametrize("index", tacotron2.TEST_CASES, ids=[tacotron2.CASES[i][0].split(":")[0]
                                                              for i in tacotron2.TEST_CASES])
def test_tacotron2_parity(index):
    # one test per case of tacotron2.TEST_CASES (each a full-size model through the legacy graph, Keras and torch:
    # pytest-xdist spreads them); `make parity` runs every case of tacotron2.CASES
    case = tacotron2.CASES[index]
    assert_rows_pass(tacotron2.rows(run_legacy([tacotron2.legacy_specs()[index]]), [case]), case[0])
