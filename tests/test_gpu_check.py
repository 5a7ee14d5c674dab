"""``bench/gpu_check.py`` runs on the CPU at tiny sizes (issue #38: the device check cannot rot where no GPU is lent).

Its CUDA-vs-CPU equality on the CPU is the model against itself (0 exactly); the fp32 and bf16 loss curves start
within bf16's rounding of each other and differ (bf16 ran); the torchaudio comparison is skipped with a note where
torchaudio is absent, and run where it is.
"""
from __future__ import annotations

import json

import pytest
import torch

from bench import gpu_check
from tests.helpers.devices import DEVICES


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("device", DEVICES)
def test_gpu_check_runs_tiny(device, tmp_path, capsys):
    out = tmp_path / "check.json"
    result = gpu_check.main(["--device", device, "--tiny", "--out", str(out)])
    written = json.loads(out.read_text())
    assert written.pop("total_seconds") > 0 and written == json.loads(json.dumps(result))
    for mode in ("teacher_forced", "free_running"):
        e = result["equality"][mode]
        assert e["passed"] and e["steps"] == 4
        if device == "cpu":
            assert e["mel_outputs"] == e["alignments"] == 0.0
    a, b = result["curves"]["fp32"]["loss"], result["curves"]["bf16"]["loss"]
    assert len(a) == len(b) == 6 and a != b and abs(a[0] - b[0]) <= 0.02 * a[0]
    t, s = result["training"], result["synthesis"]
    assert t["ours_fp32_seconds"] > 0 and t["ours_bf16_seconds"] > 0
    assert s["ours_b1_seconds"] > 0 and s["ours_b2_seconds"] > 0
    if gpu_check._torchaudio()[0] is None:
        assert "torchaudio comparison is skipped" in capsys.readouterr().out and "ratio_fp32" not in t
    else:
        assert t["ratio_fp32"] > 0 and s["ratio_b1"] > 0
    from torch_layers import _native

    if device == "cpu" and _native.library() is not None:
        assert s["ours_loop_b1"] == "decoder loop: native-step"
    elif device == "cuda":
        assert s["ours_loop_b1"].startswith("decoder loop: graph (a CUDA tensor")


def test_gpu_check_without_cuda_is_one_line(tmp_path):
    from speechblocks.errors import UsageError
    from tests.helpers.devices import NO_CUDA

    if NO_CUDA is None:
        pytest.skip("torch sees a GPU")
    with pytest.raises(UsageError, match=r"^--device cuda: this torch"):
        gpu_check.main(["--device", "cuda", "--tiny", "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()
