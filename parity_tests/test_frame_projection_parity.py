from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import frame_projection


def test_frame_projection_parity():
    assert_case_passes(frame_projection)
