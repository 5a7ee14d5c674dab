"""Build hook (the metadata is in setup.cfg): the wheel leaves out pytest's modules (``parity_tests/test_*.py``,
``parity_tests/_pytest_support.py``)."""
from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithoutTests(build_py):
    """``parity_tests`` ships its library part (the cases, the legacy reference, the report behind ``speechblocks
    parity``), not the modules pytest collects from a checkout."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if not m[1].startswith(("test_", "_pytest"))]


setup(cmdclass={"build_py": BuildPyWithoutTests})
