"""Repository-root pytest configuration: keeps TensorFlow quiet and single-process friendly."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# `pytest -n 2` on 2 cores: one thread per framework per worker, or TF and torch pools oversubscribe
# the machine and small-op code slows down by an order of magnitude.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # the library and the main test process use Keras 3


def pytest_configure(config):
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a test dependency
        return
    torch.set_num_threads(1)
