import subprocess
import sys

import pytest


@pytest.mark.parametrize("package,forbidden", [("tf_layers", "torch"), ("torch_layers", "tensorflow")])
def test_import_isolation(package, forbidden):
    """Importing one framework's package (and every public name of it) never imports the other framework. The
    same fresh process (each costs seconds of framework start-up) checks that ``sequence_mask`` is the function
    whatever the import order: the submodule shares its name, and importing it first must not rebind the package
    attribute to the module."""
    code = (f"import sys, types, {package}.sequence_mask\n"
            f"from {package} import sequence_mask\n"
            "assert isinstance(sequence_mask, types.FunctionType), type(sequence_mask)\n"
            f"for name in {package}.__all__:\n"
            f"    try:\n        getattr({package}, name)\n    except (ImportError, AttributeError):\n        pass\n"
            f"bad = sorted(m for m in sys.modules if m == {forbidden!r} or m.startswith({forbidden!r} + '.'))\n"
            "print(bad)\nsys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"import {package} pulled in {forbidden}: {proc.stdout[-500:]} {proc.stderr[-500:]}"


def test_the_core_imports_no_framework():
    """``speechblocks`` (hparams, TF1 name tables, migration machinery, text front-end, the command line) is
    framework-free: importing every module of it loads neither TensorFlow, torch nor Keras."""
    code = ("import importlib, pkgutil, sys, speechblocks\n"
            "names = [m.name for m in pkgutil.walk_packages(speechblocks.__path__, 'speechblocks.')]\n"
            "for n in names:\n    importlib.import_module(n)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'torch', 'keras', 'tf_keras'))\n"
            "print(len(names), bad)\nsys.exit(1 if bad or len(names) < 8 else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"speechblocks pulled in a framework: {proc.stdout[-500:]} {proc.stderr[-500:]}"
