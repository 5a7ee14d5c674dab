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


#: test modules that take the longest (minutes of CPU: subprocess strategies, whole-model traces, legacy graphs,
#: fuzzing); collected first, so pytest-xdist starts them first and the run does not end with one worker busy
#: on a long test while the other idles
LONG_FIRST = (
    "tests/test_distribute_keras.py", "tests/test_tacotron2_keras.py", "tests/test_checkpoint_parity.py",
    "tests/test_legacy_tacotron2.py", "tests/test_cli.py", "tests/test_migration.py",
    "parity_tests/test_tacotron2_parity.py", "parity_tests/test_decoder_rnn_parity.py",
    "tests/test_distribute_torch.py", "tests/test_export_torch.py", "tests/test_export_keras.py",
    "tests/test_cbhg_keras.py", "tests/test_cbhg_torch.py", "tests/test_long_sequences.py",
    "tests/test_fuzz_checkpoints.py", "tests/test_fuzz_migrated_files.py",
)


def pytest_collection_modifyitems(session, config, items):
    """Moves the modules of :data:`LONG_FIRST` to the front (in that order), each module's tests kept together
    and in order; the rest keep their order."""
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    order = {id(item): rank.get(item.nodeid.split("::", 1)[0], len(rank)) for item in items}
    items.sort(key=lambda item: order[id(item)])  # stable: module order and in-module order are kept
