"""Repository-root pytest configuration: keeps TensorFlow quiet and single-process friendly."""
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# `pytest -n 2` on 2 cores: one thread per framework per worker, or TF and torch pools oversubscribe
# the machine and small-op code slows down by an order of magnitude.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # the library and the main test process use Keras 3

# hypothesis' own cache (`constants/`; the example database is off below) lives outside the checkout
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "speechblocks-hypothesis"))

try:  # property tests (tests/test_properties_*.py): example counts that fit `make test`'s time budget
    from hypothesis import HealthCheck, Phase, settings
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass
else:
    # database=None: no `.hypothesis/` example database written into the checkout; deadline=None: shared,
    # noisy machines (time is bounded by the example counts, never asserted)
    _common = dict(database=None, deadline=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    # derandomize: `make test` draws the same examples every run (a failure reproduces, no flaky CI); no shrink
    # phase: shrinking a failure through eager framework calls takes minutes (the thorough profile shrinks)
    settings.register_profile("speechblocks", max_examples=6, derandomize=True,
                              phases=[Phase.explicit, Phase.generate], **_common)
    # `pytest --hypothesis-profile=thorough tests/test_properties_*.py`: longer runs, same properties, shrinking
    settings.register_profile("thorough", max_examples=200, **_common)
    settings.load_profile("speechblocks")  # the plugin's --hypothesis-profile, when given, loads after this


def pytest_configure(config):
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a test dependency
        return
    torch.set_num_threads(1)


#: seconds of worker time each test module took in a `make test` run (tests/module_durations.json: setup + call +
#: teardown of its tests, both workers, measured at 4dff2a8 on 2 cores at load ~2; regenerate from a
#: --durations=0 report when the suite changes much). Collection orders the modules longest first, so pytest-xdist
#: starts the long ones first and the run ends on short tests, both workers busy until the end (a module left
#: out of the table, a new one, goes first: its cost is unknown).
MODULE_SECONDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "module_durations.json")


def _module_seconds() -> dict:
    import json

    try:
        with open(MODULE_SECONDS_FILE) as f:
            return json.load(f)
    except (OSError, ValueError):  # pragma: no cover - the table is committed; without it the order is pytest's
        return {}


def pytest_collection_modifyitems(session, config, items):
    """Orders the test modules by :data:`MODULE_SECONDS_FILE`, longest first (modules not in it first of all), each
    module's tests kept together and in order (its module-scoped fixtures are set up once per worker)."""
    seconds = _module_seconds()
    key = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        key.setdefault(module, -seconds.get(module, float("inf")))
    items.sort(key=lambda item: key[item.nodeid.split("::", 1)[0]])  # stable: in-module order is kept
