"""Repository-root pytest configuration: keeps TensorFlow quiet and single-process friendly."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # the library and the main test process use Keras 3
