import pytest

from parity_tests._pytest_support import assert_rows_pass
from parity_tests.cases import tacotron2
from parity_tests.reference import run_legacy


@pytest.mark.parametrize("index", range(len(tacotron2.CASES)), ids=[c[0].split(":")[0] for c in tacotron2.CASES])
def test_tacotron2_parity(index):
    # one test per case (each a full-size model through the legacy graph, Keras and torch): pytest-xdist spreads them
    case = tacotron2.CASES[index]
    assert_rows_pass(tacotron2.rows(run_legacy([tacotron2.legacy_specs()[index]]), [case]), case[0])
