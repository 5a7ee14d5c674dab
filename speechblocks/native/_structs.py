"""The ctypes mirrors of the C steps' structs (``sb_decoder``, ``sb_state`` in ``decoder_step.c``;
``sb_batch_decoder``, ``sb_batch_state`` in ``decoder_batch.c``; ``sb_tacotron1_decoder`` in ``tacotron1_step.c``).
The library exports each struct's size and field offsets (``sb_*_layout``) and the loader (``_build.check_layouts``)
refuses a library whose layout differs from these: a field added on one side only is one line at load time, not memory
read at the wrong offset."""
from __future__ import annotations

import ctypes

from ._fields import _F, MAX_LAYERS

_I, _C = ctypes.c_int, ctypes.c_float


def _decoder_fields(layouts: bool) -> list:
    """``sb_decoder``'s fields (``layouts``: with its two layout flags), else ``sb_batch_decoder``'s."""
    flag = (lambda name: [(name, _I)]) if layouts else (lambda name: [])
    return [("layers", _I), ("units", _I), ("input0", _I),
            ("lstm_w", _F * MAX_LAYERS), ("lstm_b", _F * MAX_LAYERS), *flag("lstm_cols"),
            ("gate_i", _I), ("gate_f", _I), ("gate_g", _I), ("gate_o", _I), *flag("dense_cols"),
            ("keep_new", _C), ("keep_old", _C), ("zoneout", _I),
            ("prenet_layers", _I), ("num_mels", _I), ("prenet_sizes", _I * MAX_LAYERS),
            ("prenet_w", _F * MAX_LAYERS), ("prenet_b", _F * MAX_LAYERS),
            ("drop_rate", _C), ("drop_scale", _C),
            ("att_units", _I), ("max_time", _I), ("memory_size", _I),
            ("kernel", _I), ("pad_before", _I), ("smoothing", _I), ("cumulate", _I),
            ("query_w", _F), ("location_wt", _F), ("v_a", _F), ("keys_t", _F), ("values", _F),
            ("score_bias", _F), ("proj_rows", _I), ("frame_size", _I), ("r", _I),
            ("stop_at_any", _I), ("proj_w", _F), ("proj_b", _F), ("threads", _I)]


class _Decoder(ctypes.Structure):
    """``sb_decoder``: the batch-1 step's kernels read in place, rows or columns (``lstm_cols``, ``dense_cols``)."""
    _fields_ = _decoder_fields(layouts=True)


class _State(ctypes.Structure):
    _fields_ = [("cells", _F), ("hiddens", _F), ("context", _F), ("attention", _F), ("frame", _F), ("xin", _F),
                ("nmax", _I), ("gates", _F), ("partial", _F), ("prenet_buf", _F),
                ("prenet_max", _I), ("query", _F), ("energy", _F), ("out", _F),
                ("timings", ctypes.POINTER(ctypes.c_double))]


class _BatchDecoder(ctypes.Structure):
    """``sb_batch_decoder``: the kernel pointers (``*_w``) point at packed panels."""
    _fields_ = _decoder_fields(layouts=False)


class _BatchState(ctypes.Structure):
    _fields_ = [("cells", _F), ("hiddens", _F), ("context", _F), ("attention", _F), ("frame", _F), ("xin", _F),
                ("nmax", _I), ("gates", _F), ("gmax", _I), ("prenet", _F), ("query", _F),
                ("energy", _F), ("out", _F)]


class _Tacotron1Decoder(ctypes.Structure):
    """``sb_tacotron1_decoder``: a Tacotron-1 decoder's kernels read in place (rows or columns: ``cols``) and one
    call's attention memory; the GRUs in the order attention GRU, GRU 1, GRU 2."""
    _fields_ = [("batch", _I), ("num_mels", _I), ("frame_size", _I), ("max_time", _I), ("memory_size", _I),
                ("att_units", _I), ("dec_units", _I), ("cols", _I), ("prenet_outside", _I), ("prenet_layers", _I),
                ("prenet_sizes", _I * MAX_LAYERS), ("prenet_w", _F * MAX_LAYERS), ("prenet_b", _F * MAX_LAYERS),
                ("gates_w", _F * 3), ("gates_b", _F * 3), ("cand_w", _F * 3), ("cand_b", _F * 3),
                ("query_w", _F), ("v_a", _F), ("location_wt", _F), ("kernel", _I), ("pad_before", _I),
                ("keys", _F), ("values", _F), ("score_bias", _F), ("cell0_w", _F), ("cell0_b", _F), ("out_w", _F),
                ("out_b", _F), ("threads", _I)]


#: the C function that reports each mirror's layout
LAYOUTS = {"sb_decoder_layout": _Decoder, "sb_state_layout": _State, "sb_batch_decoder_layout": _BatchDecoder,
           "sb_batch_state_layout": _BatchState, "sb_tacotron1_decoder_layout": _Tacotron1Decoder}
