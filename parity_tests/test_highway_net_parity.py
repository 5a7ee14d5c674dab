from parity_tests._pytest_support import assert_case_passes
from parity_tests.cases import highway_net


def test_highway_net_parity():
    assert_case_passes(highway_net)
