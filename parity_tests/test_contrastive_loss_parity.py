from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import contrastive_loss


def test_contrastive_loss_parity():
    assert_case_passes(contrastive_loss)
