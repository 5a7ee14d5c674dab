"""Legacy builders of the recurrent Tacotron-2 blocks (``BUILDERS``: name -> build function).

A build function takes ``(config, inputs, training, options)`` and returns ``(block_scope, outputs)``.
Zoneout keep-masks for training-mode parity come in as inputs named ``zoneout_*``.
"""
from __future__ import annotations

from .tf1_recurrent import decoder_rnn_sequence, decoder_rnn_step, encoder_rnn, zoneout_lstm_sequence


def build_zoneout_lstm_cell(config, inputs, training, options):
    masks = None
    if "zoneout_c" in inputs:
        masks = (inputs["zoneout_c"], inputs["zoneout_h"])
    (out, (c, h)), _ = zoneout_lstm_sequence(inputs["inputs"], (inputs["c0"], inputs["h0"]), config, training, masks)
    return config.get("tf1_scope") or "lstm_cell", {"outputs": out, "state/c": c, "state/h": h}


def build_encoder_rnn(config, inputs, training, options):
    masks = None
    if "zoneout_fw_c" in inputs:
        masks = tuple(inputs[f"zoneout_{d}_{s}"] for d in ("fw", "bw") for s in ("c", "h"))
    out, _ = encoder_rnn(inputs["inputs"], inputs["input_lengths"], config, training, masks)
    return config.get("tf1_scope") or "encoder_LSTM", {"outputs": out}


def build_decoder_rnn(config, inputs, training, options):
    n_layers = int(config.get("layers", 2))
    masks = None
    if "zoneout_c_0" in inputs:
        masks = [(inputs[f"zoneout_c_{k}"], inputs[f"zoneout_h_{k}"]) for k in range(n_layers)]
    (out, state), _ = decoder_rnn_sequence(inputs["inputs"], config, training, masks, return_state=True)
    outputs = {"outputs": out}
    for k, s in enumerate(state):
        outputs[f"state/{k}/c"] = s.c
        outputs[f"state/{k}/h"] = s.h
    return config.get("tf1_scope") or "decoder_rnn", outputs


def build_decoder_rnn_step(config, inputs, training, options):
    n_layers = int(config.get("layers", 2))
    states = [(inputs[f"c_{k}"], inputs[f"h_{k}"]) for k in range(n_layers)]
    masks = None
    if "zoneout_c_0" in inputs:
        masks = [(inputs[f"zoneout_c_{k}"], inputs[f"zoneout_h_{k}"]) for k in range(n_layers)]
    (out, new_states), _ = decoder_rnn_step(inputs["inputs"], states, config, training, masks)
    outputs = {"outputs": out}
    for k, s in enumerate(new_states):
        outputs[f"state/{k}/c"] = s.c
        outputs[f"state/{k}/h"] = s.h
    return config.get("tf1_scope") or "decoder_rnn", outputs


BUILDERS = {
    "ZoneoutLSTMCell": build_zoneout_lstm_cell,
    "EncoderRNN": build_encoder_rnn,
    "DecoderRNN": build_decoder_rnn,
    "DecoderRNNStep": build_decoder_rnn_step,
}
