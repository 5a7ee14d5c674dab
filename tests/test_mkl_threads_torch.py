"""torch_layers._mkl_threads: MKL single-threaded (thread-local) in the recurrent loops, restored, bit-identical."""
import ctypes
import os
import threading

import pytest
import torch

from torch_layers import CBHG, Tacotron1
from torch_layers import _mkl_threads as mkl
from torch_layers import tf1_gru_cell as gru

needs_mkl = pytest.mark.skipif(mkl.mkl_local_setter() is None, reason="this torch has no MKL")


def _mkl_max_threads() -> int:
    """MKL's thread count as seen by the calling thread (``MKL_Get_Max_Threads``)."""
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for name in sorted(os.listdir(lib_dir)):
        if "torch_cpu" in name:
            fn = getattr(ctypes.CDLL(os.path.join(lib_dir, name)), "MKL_Get_Max_Threads", None)
            if fn is not None:
                fn.restype = ctypes.c_int
                return fn()
    raise RuntimeError("MKL_Get_Max_Threads not found")


@pytest.fixture
def two_threads():
    """MKL's thread count 2 on this thread for the test (torch.set_num_threads: also MKL's dynamic mode off, the
    state the fix is for), the previous count restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@needs_mkl
def test_single_threaded_mkl_is_scoped_restored_on_raise_and_thread_local(two_threads, monkeypatch):
    monkeypatch.delenv(mkl.ENV, raising=False)
    assert _mkl_max_threads() == 2
    seen = []
    torch.set_num_threads(2)

    def other_thread():
        seen.append(_mkl_max_threads())

    def look_from_another_thread():
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()

    look_from_another_thread()
    with mkl.single_threaded_mkl():
        assert _mkl_max_threads() == 1
        assert torch.get_num_threads() == 2  # ATen's intra-op threads untouched
        look_from_another_thread()
    assert _mkl_max_threads() == 2
    assert seen[0] == seen[1]  # another thread does not see this thread's setting
    with pytest.raises(ZeroDivisionError):
        with mkl.single_threaded_mkl():
            assert _mkl_max_threads() == 1
            1 / 0
    assert _mkl_max_threads() == 2  # restored when the body raised


@needs_mkl
def test_opt_out_leaves_mkl_alone(two_threads, monkeypatch):
    monkeypatch.setenv(mkl.ENV, "keep")
    assert not mkl.loops_single_threaded()
    with mkl.single_threaded_mkl():
        assert _mkl_max_threads() == 2


def test_decoder_loop_restores_mkl_threads_when_it_raises(two_threads, monkeypatch):
    """The decoder's scripted loop raising (here: a stand-in) leaves this thread's MKL count as it was."""
    import torch_layers.tacotron1_decoder as dec

    model = Tacotron1("keithito", num_mels=6, outputs_per_step=2, max_iters=3).eval()
    before = _mkl_max_threads() if mkl.mkl_local_setter() is not None else None
    seen = []

    def failing(*args):
        seen.append(_mkl_max_threads() if before is not None else None)
        raise RuntimeError("loop failed")

    monkeypatch.setattr(dec, "_scripted", lambda name: failing if name == "decode" else dec._SCRIPTED[name])
    with pytest.raises(RuntimeError, match="loop failed"):
        model.decoder(torch.randn(1, 5, 256))
    if before is not None:
        assert seen == [1] and _mkl_max_threads() == before


@pytest.mark.parametrize("lengths", [None, torch.tensor([9, 4, 1])])
def test_cbhg_inference_bit_identical_with_and_without(two_threads, monkeypatch, lengths):
    """MKL single-threaded in the loops or left alone, forked or one direction after the other: the same bits."""
    cfg = dict(K=3, conv_channels=4, pool_size=2, projections=[6, 16], projection_kernel_size=3,
               n_highwaynet_layers=2, highway_units=12, rnn_units=5)
    cbhg = CBHG(16, **cfg).eval()
    x = torch.randn(3, 9, 16)
    monkeypatch.setattr(torch, "get_num_interop_threads", lambda: 2)
    seen = []
    forked = gru._bidirectional_recurrence
    monkeypatch.setattr(gru, "_bidirectional_recurrence",
                        lambda *a: seen.append(_mkl_max_threads() if mkl.mkl_local_setter() else 1) or forked(*a))
    with torch.inference_mode():
        new = cbhg(x, lengths)
        monkeypatch.setenv(mkl.ENV, "keep")
        kept = cbhg(x, lengths)
        monkeypatch.delenv(mkl.ENV)
        monkeypatch.setattr(gru, "_side_by_side", lambda: False)
        sequential = cbhg(x, lengths)
    assert seen[0] == 1  # the calling thread's MKL count during the loops
    assert torch.equal(new, kept) and torch.equal(new, sequential)


def test_tacotron1_synthesis_bit_identical_with_and_without(two_threads, monkeypatch):
    model = Tacotron1("keithito", max_iters=6).eval()
    ids = torch.randint(1, 60, (1, 20), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        monkeypatch.delenv(mkl.ENV, raising=False)
        new = model(ids, max_iters=6)
        monkeypatch.setenv(mkl.ENV, "keep")
        kept = model(ids, max_iters=6)
    for key in new:
        assert torch.equal(new[key], kept[key]), key
    assert torch.get_num_threads() == 2
