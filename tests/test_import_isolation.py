import subprocess
import sys

import pytest


@pytest.mark.parametrize("package,forbidden", [("tf_layers", "torch"), ("torch_layers", "tensorflow")])
def test_import_isolation(package, forbidden):
    code = (f"import sys, {package}\n"
            f"for name in {package}.__all__:\n"
            f"    try:\n        getattr({package}, name)\n    except (ImportError, AttributeError):\n        pass\n"
            f"bad = sorted(m for m in sys.modules if m == {forbidden!r} or m.startswith({forbidden!r} + '.'))\n"
            "print(bad)\nsys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"import {package} pulled in {forbidden}: {proc.stdout[-500:]} {proc.stderr[-500:]}"
