"""Non-finite inputs: NaN / +inf / -inf propagate through every Tacotron-2 block exactly as in the TF1 graph.

Each TF1 block runs its legacy graph, its Keras layer and its torch twin (inference mode, same TF1 checkpoint)
on inputs holding a NaN, a +inf and a -inf -- inside the valid frames, and for the blocks with lengths
(``EncoderRNN``, ``CBHG``, ``LocationSensitiveAttention``) also in the padding. ``compare`` demands the NaN, +inf
and -inf positions of every output to match the TF1 ones exactly (and the finite values to 1e-5): the class
docstrings promise "NaN and inf propagate as in the original TF1 graph". A row ``... non-finite outputs`` per
block states how many non-finite entries the reference produced (so a case that accidentally stayed finite
would show 0 and FAIL). The attention's alignments and states are softmax rows: there the reference is compared
at the level the original guarantees on every CPU (a row holding a NaN, see ``poison_softmax_rows``). The torch-native
modules and the blocks without a TF1 graph of their own (TF1GRUCell, Tacotron2Decoder, Tacotron2) are covered
against the other framework in ``tests/test_nonfinite_*.py`` and ``tests/test_nonfinite_twins.py``.
"""
from __future__ import annotations

import numpy as np

from ..reference import LegacySpec
from ..report import Row, compare
from ._common import FLOAT32_TOL, keras_from_checkpoint, randn, to_numpy, torch_from_checkpoint, torch_tensor

BLOCK = "non-finite inputs"


def _poison(x, nan=(), posinf=(), neginf=()):
    """A copy of ``x`` with NaN / +inf / -inf written at the given index tuples."""
    x = np.array(x, copy=True)
    for idx in nan:
        x[idx] = np.nan
    for idx in posinf:
        x[idx] = np.inf
    for idx in neginf:
        x[idx] = -np.inf
    return x


def _seq(shape, seed, **where):
    return _poison(randn(shape, seed=seed), **where)


# three entries per 3-D input: a NaN in example 0, +inf and -inf in example 1 (example 2, if any, stays finite)
_FRAME = dict(nan=[(0, 2, 1)], posinf=[(1, 5, 0)], neginf=[(1, 1, 2)])

CBHG_CONFIG = dict(K=3, conv_channels=6, pool_size=2, projections=[8, 5], projection_kernel_size=3,
                   n_highwaynet_layers=2, highway_units=6, rnn_units=4)

# (label, legacy block, config, inputs, torch input-size argument or None)
CASES = [
    ("Conv1DBlock k4 relu", "Conv1DBlock", dict(kernel_size=4, channels=5, activation="relu", drop_rate=0.5),
     {"inputs": _seq((3, 8, 3), 1, **_FRAME)}),
    ("HighwayNet", "HighwayNet", dict(units=4), {"inputs": _seq((3, 7, 4), 2, **_FRAME)}),
    ("EncoderConvolutions k5 2x6", "EncoderConvolutions", dict(kernel_size=5, channels=6, num_layers=2, drop_rate=0.5),
     {"inputs": _seq((3, 9, 4), 3, **_FRAME)}),
    ("Postnet k3 5x4 tanh", "Postnet", dict(kernel_size=3, channels=4, num_layers=5, drop_rate=0.5),
     {"inputs": _seq((3, 9, 3), 4, **_FRAME)}),
    ("Prenet [6,5]", "Prenet", dict(layers_sizes=[6, 5], drop_rate=0.5), {"inputs": _seq((3, 6, 4), 5, **_FRAME)}),
    ("FrameProjection 3", "FrameProjection", dict(shape=3), {"inputs": _seq((3, 6, 4), 6, **_FRAME)}),
    ("StopProjection 2 (sigmoid)", "StopProjection", dict(shape=2), {"inputs": _seq((3, 6, 4), 7, **_FRAME)}),
    ("ZoneoutLSTMCell 4 units", "ZoneoutLSTMCell",
     dict(num_units=4, zoneout_factor_cell=0.1, zoneout_factor_output=0.2),
     {"inputs": _seq((3, 6, 3), 8, **_FRAME), "c0": _seq((3, 4), 9, posinf=[(2, 1)]), "h0": randn((3, 4), seed=10)}),
    # lengths [8, 5, 3]: a NaN inside example 0, NaN/+inf in the padding of example 1, -inf inside example 2
    # and +inf in its padding
    ("EncoderRNN 2x4, lengths [8,5,3]", "EncoderRNN", dict(size=4, zoneout=0.1),
     {"inputs": _seq((3, 8, 5), 11, nan=[(0, 3, 0), (1, 6, 1)], posinf=[(1, 7, 2), (2, 5, 0)], neginf=[(2, 1, 3)]),
      "input_lengths": np.array([8, 5, 3], np.int32)}),
    ("DecoderRNN 2x4", "DecoderRNN", dict(layers=2, size=4, zoneout=0.1), {"inputs": _seq((3, 6, 3), 12, **_FRAME)}),
    ("CBHG K3, lengths [9,6,4]", "CBHG", CBHG_CONFIG,
     {"inputs": _seq((3, 9, 5), 13, nan=[(0, 4, 0), (1, 7, 1)], posinf=[(2, 6, 2)], neginf=[(2, 1, 3)]),
      "input_lengths": np.array([9, 6, 4], np.int32)}),
    # +inf and -inf only: a NaN run of >= pool_size frames (the conv bank spreads a NaN over k frames) becomes
    # TF's lowest float in the max-pool, whose sums downstream may overflow in float-order dependent ways (the
    # lengths case above matches exactly anyway)
    ("CBHG K3, input_lengths=None", "CBHG", CBHG_CONFIG,
     {"inputs": _seq((3, 9, 5), 14, posinf=[(0, 2, 1), (1, 5, 0)], neginf=[(1, 1, 2)])}),
    # memory: NaN inside example 0, NaN in the padding of example 1 (TF1 masks the memory by multiplication:
    # 0 * NaN = NaN, which the twins reproduce); a +inf query of example 2 at step 3
    ("LocationSensitiveAttention, lengths [7,4,5]", "LocationSensitiveAttention",
     dict(units=6, filters=3, kernel_size=5),
     {"memory": _seq((3, 7, 4), 15, nan=[(0, 2, 1), (1, 5, 0)]), "memory_lengths": np.array([7, 4, 5], np.int32),
      "queries": _seq((3, 5, 6), 16, posinf=[(2, 3, 0)])}),
]


def legacy_specs():
    return [LegacySpec(block, config, inputs, seed=70 + i) for i, (_, block, config, inputs) in enumerate(CASES)]


def _run(block, config, result):
    """``{output name: (keras array, torch array)}`` of the block loaded from ``result``'s TF1 checkpoint."""
    import torch

    import tf_layers
    import torch_layers

    ins = result.spec.inputs
    x = ins.get("inputs")
    if block == "ZoneoutLSTMCell":
        from .zoneout_lstm_cell import _step_keras, _step_torch

        kb = keras_from_checkpoint(tf_layers.ZoneoutLSTMCell(**config), result)
        tb = torch_from_checkpoint(torch_layers.ZoneoutLSTMCell(x.shape[-1], **config), result).eval()
        k = _step_keras(kb, x, ins["c0"], ins["h0"])
        t = _step_torch(tb, x, ins["c0"], ins["h0"])
        return dict(zip(("outputs", "state/c", "state/h"), zip(k, t)))
    if block == "LocationSensitiveAttention":
        from .location_sensitive_attention import _run_keras, _run_torch, _weights

        w = _weights(result)
        ka = tf_layers.LocationSensitiveAttention(**config)
        ka.load_tf1_weights(w)
        ta = torch_layers.LocationSensitiveAttention(ins["queries"].shape[-1], ins["memory"].shape[-1], **config).eval()
        ta.load_tf1_weights(w)
        k = _run_keras(ka, ins["memory"], ins["memory_lengths"], ins["queries"])
        t = _run_torch(ta, ins["memory"], ins["memory_lengths"], ins["queries"])
        return dict(zip(("alignments", "contexts", "states"), zip(k, t)))
    size = config["projections"][-1] if block == "CBHG" else x.shape[-1]
    kb = keras_from_checkpoint(getattr(tf_layers, block)(**config), result)
    tb = getattr(torch_layers, block)
    tb = torch_from_checkpoint(tb(**config) if block == "HighwayNet" else tb(size, **config), result).eval()
    masks = [result.outputs[f"mask/{j}"] for j in range(len(config.get("layers_sizes", ())))] or None
    if block == "DecoderRNN":
        from .decoder_rnn import _flat

        with torch.no_grad():
            t = [to_numpy(a) for a in _flat(*tb(torch_tensor(x)))]
        k = [np.asarray(a) for a in _flat(*kb(x, training=False))]
        names = ["outputs"] + [f"state/{j}/{s}" for j in range(config["layers"]) for s in ("c", "h")]
        return dict(zip(names, zip(k, t)))
    args_k, args_t = [x], [torch_tensor(x)]
    if "input_lengths" in ins:
        args_k.append(ins["input_lengths"])
        args_t.append(torch_tensor(ins["input_lengths"]))
    kw_k = {"dropout_masks": masks} if masks else {}
    with torch.no_grad():
        yt = tb(*args_t, [torch_tensor(m) for m in masks]) if masks else tb(*args_t)
    yk = kb(*args_k, training=False, **kw_k) if block != "HighwayNet" else kb(*args_k)
    return {"outputs": (np.asarray(yk), to_numpy(yt))}


def _count_row(block, label, ref, comparison="TF1 reference"):
    n = int(sum(np.size(r) - np.isfinite(r).sum() for r in ref))
    return Row(block, comparison, f"{label}: non-finite outputs (> 0 expected)", 0.0 if n else float("inf"), 0.0,
               note=f"{n} non-finite entries")


def _twin(block, label, pairs):
    """Keras <-> torch rows of ``{name: (keras, torch)}`` plus the count row of the torch side."""
    out = [compare(block, "Keras<->torch", f"{label}: {name}", np.asarray(k), to_numpy(t), FLOAT32_TOL)
           for name, (k, t) in pairs.items()]
    out.append(_count_row(block, label, [to_numpy(t) for _, t in pairs.values()], "torch (the reference)"))
    return out


def twin_rows():
    """Blocks without a TF1 graph of their own: the torch-native modules (their PyTorch original is the reference;
    our torch module is it, the Keras twin must reproduce its NaN/inf positions) and the TF1 GRU cell."""
    import torch

    import tf_layers
    import torch_layers

    out = []
    torch.manual_seed(0)
    # TF1GRUCell stepped over time: a NaN in example 0 at step 2, +inf / -inf in example 1
    x = _seq((3, 6, 4), 30, **_FRAME)
    tc = torch_layers.TF1GRUCell(4, 3)
    kc = tf_layers.TF1GRUCell(3)
    kc.load_tf1_weights(tc.tf1_weights())
    hk, ht, ks, ts = np.zeros((3, 3), np.float32), torch.zeros(3, 3), [], []
    with torch.no_grad():
        for t in range(x.shape[1]):
            hk = np.asarray(kc(x[:, t], [hk])[0])
            ht = tc(torch_tensor(np.ascontiguousarray(x[:, t])), ht)
            ks.append(hk), ts.append(ht)
    out += _twin("TF1GRUCell", "6 steps", {"states": (np.stack(ks, 1), torch.stack(ts, 1))})

    # GE2E SpeakerEncoder: NaN in utterance 0, +inf / -inf in utterance 1
    cfg = dict(mel_n_channels=4, model_hidden_size=6, model_num_layers=2, model_embedding_size=5)
    tm = torch_layers.SpeakerEncoder(**cfg).eval()
    km = tf_layers.SpeakerEncoder(**cfg)
    km.load_torch_state_dict(tm.state_dict())
    x = _seq((3, 7, 4), 31, **_FRAME)
    with torch.no_grad():
        out += _twin("SpeakerEncoder", "3 utterances", {"embeddings": (km(x), tm(torch_tensor(x)))})

    # TAC: NaN in a valid mic of example 0, +inf in the invalid mic of example 1 (valid_mics [3, 2])
    tm = torch_layers.TAC(4, hidden_dim=6).eval()
    km = tf_layers.TAC(4, hidden_dim=6)
    km.load_torch_state_dict(tm.state_dict())
    x = _poison(randn((2, 3, 4, 5, 2), seed=32), nan=[(0, 1, 2, 3, 0)], posinf=[(1, 2, 0, 1, 1)])
    valid = np.array([3, 2], np.int32)
    with torch.no_grad():
        out += _twin("TAC", "valid_mics [3,2]", {"outputs": (km(x, valid), tm(torch_tensor(x), torch_tensor(valid)))})

    # GumbelVectorQuantizer (inference: argmax of the logits): NaN in frame (0, 2), +inf / -inf in example 1
    cfg = dict(dim=4, num_vars=3, groups=2, vq_dim=4, combine_groups=False)
    tq = torch_layers.GumbelVectorQuantizer(**cfg).eval()
    kq = tf_layers.GumbelVectorQuantizer(**cfg)
    kq.load_torch_state_dict(tq.state_dict())
    x = _seq((2, 6, 4), 33, **_FRAME)
    with torch.no_grad():
        yt, pt, _, it = tq(torch_tensor(x), return_ids=True)
    yk, pk, _, ik = kq(x, training=False, return_ids=True)
    out += _twin("GumbelVectorQuantizer", "eval", {"quantized": (yk, yt), "prob_ppl_loss": (pk, pt)})
    out.append(compare("GumbelVectorQuantizer", "Keras<->torch", "eval: ids", np.asarray(ik), to_numpy(it), 0.5))

    # ContrastiveLoss (per-target losses, same negatives): a NaN spectrogram entry in example 0
    from .contrastive_loss import _inputs, _keras_loss, _torch_loss

    spec, masks, dec = _inputs({}, 8, seed=34)
    spec = _poison(spec, nan=[(0, 1, 3)], posinf=[(1, 2, 9)])
    tl = _torch_loss({}, reduce="none", multiplier=3.0, generator=torch.Generator().manual_seed(5)).eval()
    with torch.no_grad():
        yt = tl(torch_tensor(spec), torch_tensor(masks), torch_tensor(dec))
    kl = _keras_loss({}, reduce="none", multiplier=3.0)
    kl.load_torch_state_dict(tl.state_dict())
    yk = kl(spec, masks, dec, training=False, negative_indices=to_numpy(tl.negative_indices))
    out += _twin("ContrastiveLoss", "per-target losses", {"losses": (yk, yt)})
    return out + tacotron2_rows()


#: a small deterministic RTVC model (no dropout, no zoneout: nothing random in inference)
TACOTRON2 = dict(embedding_dim=8, enc_conv_channels=8, enc_conv_kernel_size=3, encoder_lstm_units=4, attention_dim=4,
                 attention_filters=2, attention_kernel=3, prenet_layers=[4, 4], decoder_layers=1,
                 decoder_lstm_units=6, postnet_channels=4, postnet_num_layers=2, num_mels=3, outputs_per_step=2,
                 max_iters=4, speaker_embedding_size=2, tacotron_dropout_rate=0.0, tacotron_zoneout_rate=0.0)


def tacotron2_rows():
    """Tacotron2 (and so Tacotron2Decoder, LocationSensitiveAttention, every block inside): teacher-forced
    inference with a NaN speaker embedding in example 1 and a +inf target frame in example 0 (after its first
    step), Keras <-> torch on the same TF1 weights."""
    import torch

    import tf_layers
    import torch_layers

    ids = np.array([[1, 4, 2, 7, 3], [5, 2, 6, 0, 0]], np.int32)
    lengths = np.array([5, 3], np.int32)
    speakers = _poison(randn((2, 2), seed=40), nan=[(1, 0)])
    targets = _poison(randn((2, 6, 3), seed=41), posinf=[(0, 3, 1)])
    km = tf_layers.Tacotron2("rtvc", n_symbols=8, **TACOTRON2)
    yk = km(ids, lengths, speaker_embeddings=speakers, mel_targets=targets, training=False)
    tm = torch_layers.Tacotron2("rtvc", n_symbols=8, **TACOTRON2).eval()
    tm.load_tf1_weights(km.tf1_weights())
    with torch.no_grad():
        yt = tm(torch_tensor(ids).long(), torch_tensor(lengths).long(), speaker_embeddings=torch_tensor(speakers),
                mel_targets=torch_tensor(targets))
    names = ("decoder_outputs", "mel_outputs", "stop_token_prediction", "alignments")
    return _twin("Tacotron2", "teacher-forced", {n: (yk[n], yt[n]) for n in names})


#: softmax rows of the attention outputs (axis of ``max_time``): ``_run`` stacks alignments ``[B, T_in, steps]``
#: and states ``[B, steps, T_in]``
_SOFTMAX_ROW_AXIS = {"alignments": 1, "states": 2}


def poison_softmax_rows(ref, axis):
    """The reference with every softmax row that holds a NaN made NaN in full.

    Which entries of a softmax row mixing a NaN energy with others come out NaN is the TF1 kernel's choice
    (oneDNN on AVX-512: only the NaN entry; Eigen: every entry); what the original guarantees on every CPU is
    that the row holds a NaN. The twins define such a row as NaN everywhere (``nan_poisoned_softmax`` /
    ``normalize_energy``), so the reference is compared at the level the original guarantees.
    """
    ref = np.array(ref, dtype=np.float64, copy=True)
    poisoned = np.isnan(ref).any(axis=axis, keepdims=True)
    return np.where(poisoned, np.nan, ref)


def rows(legacy):
    out = twin_rows()
    for (label, block, config, _), result in zip(CASES, legacy):
        got = _run(block, config, result)
        for name, (k, t) in got.items():
            ref = result.outputs[name]
            if block == "LocationSensitiveAttention" and name in _SOFTMAX_ROW_AXIS:
                ref = poison_softmax_rows(ref, _SOFTMAX_ROW_AXIS[name])
            out.append(compare(block, "TF1->Keras", f"{label}: {name}", k, ref, FLOAT32_TOL))
            out.append(compare(block, "TF1->torch", f"{label}: {name}", t, ref, FLOAT32_TOL))
        out.append(_count_row(block, label, [result.outputs[name] for name in got]))
    return out
