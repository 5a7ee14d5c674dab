"""The Tacotron-1 family's presets, TF1 variable schema and inspection (no framework imported).

Expected names and shapes come from outside the schema: keys users pasted from real checkpoints (keithito/tacotron
issue #192's missing key, #203's embedding shape from ``tacotron-20170720``), the scopes a keithito fork's
``train.py`` lists verbatim, and shapes worked out by hand from TF's ``GRUCell`` (``gates/kernel`` is
``[input + units, 2 * units]``) and ``AttentionWrapper`` (the cell's input is ``concat(input, previous context)``,
the context as wide as the memory). Checkpoints are TF1 tensor bundles written here in numpy."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from speechblocks import cli
from speechblocks.migration.inventory import inspect_checkpoint
from speechblocks.tacotron1_hparams import (
    TACOTRON1_PRESETS,
    learning_rate,
    resolve_tacotron1_hparams,
    tacotron1_hparams,
)
from speechblocks.tacotron1_schema import (
    LAYOUTS,
    ModelFamilyError,
    Tacotron1ShapesError,
    attention_cell_scopes,
    canonical_names,
    check_preset_family,
    infer_layout_and_hparams,
    tf1_variable_shapes,
)
from tests.helpers.tacotron2_checkpoint import small_variables
from tests.test_training_backend import _write_tf1_checkpoint

PREFIX = "model/inference/"
CELL0 = "decoder/output_projection_wrapper/multi_rnn_cell/cell_0/output_projection_wrapper"
CONCAT = CELL0 + "/concat_output_and_attention_wrapper"
PRESET_OF = {"keithito-20170720": "keithito", "keithito-20180906": "keithito", "mimic2": "mimic2"}
# small but shape-telling sizes (every width distinct); mimic2 keeps its fixed location filters and kernel
SMALL = dict(prenet_depths=[12, 6], encoder_depth=14, attention_depth=10, decoder_depth=16, postnet_depth=18,
             num_mels=5, num_freq=9, outputs_per_step=3)


# -- presets -------------------------------------------------------------------------------------------------------
def test_presets_are_the_original_hparams_files():
    keithito, mimic2 = tacotron1_hparams("keithito"), tacotron1_hparams("mimic2")
    # the names each original hparams.py defines (keithito d26c763, mimic2 9fd123c)
    assert sorted(keithito) == sorted(
        "cleaners num_mels num_freq sample_rate frame_length_ms frame_shift_ms preemphasis min_level_db ref_level_db "
        "outputs_per_step embed_depth prenet_depths encoder_depth postnet_depth attention_depth decoder_depth "
        "batch_size adam_beta1 adam_beta2 initial_learning_rate decay_learning_rate use_cmudict max_iters "
        "griffin_lim_iters power".split())
    assert sorted(mimic2) == sorted(
        "cleaners num_mels num_freq min_mel_freq max_mel_freq sample_rate frame_length_ms frame_shift_ms "
        "min_level_db ref_level_db trim_fft_size trim_hop_size trim_top_db outputs_per_step embedding_dim batch_size "
        "adam_beta1 adam_beta2 initial_learning_rate learning_rate_decay_halflife use_cmudict max_iters "
        "griffin_lim_iters power".split())
    assert (keithito["sample_rate"], mimic2["sample_rate"]) == (20000, 22000)
    assert (keithito["embed_depth"], mimic2["embedding_dim"]) == (256, 512)
    assert (keithito["initial_learning_rate"], mimic2["initial_learning_rate"]) == (0.002, 0.0015)
    keithito["prenet_depths"].append(1)  # a fresh copy each time
    assert TACOTRON1_PRESETS["keithito"]["prenet_depths"] == [256, 128]


def test_resolved_presets_and_their_differences():
    k, m = resolve_tacotron1_hparams("keithito"), resolve_tacotron1_hparams("mimic2")
    assert (k.variant, k.attention, k.embed_depth, k.n_symbols) == ("keithito", "bahdanau", 256, 149)
    assert (m.variant, m.attention, m.embed_depth, m.location_filters, m.location_kernel_size) == \
        ("mimic2", "location_sensitive", 512, 20, 7)
    assert (m.prenet_depths, m.encoder_depth, m.decoder_depth) == ((256, 128), 256, 256)  # mimic2's constants
    assert (k.n_priority_freq, m.n_priority_freq) == (307, 279)  # int(3000 / 10000 * 1025), int(3000 / 11000 * 1025)
    assert resolve_tacotron1_hparams(k.to_dict()) == k and resolve_tacotron1_hparams(m.to_dict()) == m
    assert resolve_tacotron1_hparams({"embedding_dim": 64}).variant == "mimic2"  # mimic2's names are read as mimic2


def test_learning_rate_schedules():
    k, m = resolve_tacotron1_hparams("keithito"), resolve_tacotron1_hparams("mimic2")
    # keithito: 0.002 * 4000**0.5 * min(s * 4000**-1.5, s**-0.5), s = step + 1
    assert learning_rate(0, k) == pytest.approx(0.002 / 4000)
    assert learning_rate(3999, k) == pytest.approx(0.002)
    assert learning_rate(15999, k) == pytest.approx(0.001)  # s = 16000: 0.002 * (4000 / 16000) ** 0.5
    assert learning_rate(10, resolve_tacotron1_hparams(decay_learning_rate=False)) == 0.002
    # mimic2: exponential_decay(0.0015, step, 100000, 0.5), not staircase
    assert learning_rate(0, m) == 0.0015
    assert learning_rate(100000, m) == pytest.approx(0.00075)
    assert learning_rate(50000, m) == pytest.approx(0.0015 / 2 ** 0.5)


@pytest.mark.parametrize("overrides, name", [
    (dict(encoder_depth=255), "encoder_depth"), (dict(postnet_depth=7), "postnet_depth"),
    (dict(prenet_depths=[]), "prenet_depths"), (dict(num_mels=0), "num_mels"), (dict(attention="luong"), "attention"),
    (dict(adam_beta1=1.0), "adam_beta1"), (dict(decay_learning_rate="yes"), "decay_learning_rate"),
    (dict(embed_dept=3), "embed_dept")])
def test_bad_hparams_are_named(overrides, name):
    with pytest.raises(ValueError, match=f"Tacotron1: .*{name}"):
        resolve_tacotron1_hparams("keithito", **overrides)


# -- the schema against the evidence -------------------------------------------------------------------------------
def test_names_reported_from_real_checkpoints():
    for layout in LAYOUTS:
        names = tf1_variable_shapes(resolve_tacotron1_hparams(PRESET_OF[layout]), layout)
        # keithito/tacotron #192: the key a restore looked for
        assert "decoder/output_projection_wrapper/multi_rnn_cell/cell_0/output_projection_wrapper/bias" in names
    shapes = tf1_variable_shapes(resolve_tacotron1_hparams("keithito"), "keithito-20170720")
    assert shapes["embedding"] == (149, 256)  # keithito/tacotron #203: tacotron-20170720's embedding


def test_the_2017_nesting_is_the_scopes_a_keithito_fork_lists():
    """The scopes a keithito fork's train.py lists for the pre-bc20c40 model (plus memory_layer and dense, which
    another keithito-based repository restores by name) hold every variable of the 2017 layout, each one some."""
    listed = ["embedding", "prenet", "encoder_cbhg", "memory_layer", "post_cbhg", "dense",
              CONCAT + "/attention_wrapper/decoder_prenet_wrapper/decoder_prenet",
              CONCAT + "/attention_wrapper/decoder_prenet_wrapper/gru_cell",
              CONCAT + "/attention_wrapper/bahdanau_attention",
              CELL0 + "/kernel", CELL0 + "/bias",
              "decoder/output_projection_wrapper/multi_rnn_cell/cell_1",
              "decoder/output_projection_wrapper/multi_rnn_cell/cell_2",
              "decoder/output_projection_wrapper/kernel", "decoder/output_projection_wrapper/bias"]
    names = tf1_variable_shapes(resolve_tacotron1_hparams("keithito"), "keithito-20170720")

    def under(name, scope):
        return name == scope or name.startswith(scope + "/")

    assert all(any(under(n, s) for s in listed) for n in names)
    assert all(any(under(n, s) for n in names) for s in listed)


def test_prenet_position_shapes_by_hand():
    """80 mels, pre-net [256, 128], memory 256 (two GRUs of 128), attention GRU 256."""
    hp = resolve_tacotron1_hparams("keithito")
    new = tf1_variable_shapes(hp, "keithito-20180906")
    old = tf1_variable_shapes(hp, "keithito-20170720")
    outside = CONCAT + "/decoder_prenet_wrapper"
    inside = CONCAT + "/attention_wrapper/decoder_prenet_wrapper"
    assert new[outside + "/decoder_prenet/dense_1/kernel"] == (80, 256)
    assert new[outside + "/attention_wrapper/gru_cell/gates/kernel"] == (128 + 256 + 256, 512)
    assert new[outside + "/attention_wrapper/gru_cell/candidate/kernel"] == (640, 256)
    assert new[outside + "/attention_wrapper/bahdanau_attention/query_layer/kernel"] == (256, 256)
    assert old[inside + "/decoder_prenet/dense_1/kernel"] == (80 + 256, 256)  # concat(frame, previous context)
    assert old[inside + "/gru_cell/gates/kernel"] == (128 + 256, 512)
    mimic2 = tf1_variable_shapes(resolve_tacotron1_hparams("mimic2"), "mimic2")
    att = CONCAT + "/attention_wrapper/location_sensitive_attention"
    assert mimic2[att + "/location_conv/kernel"] == (7, 1, 20) and mimic2[att + "/location_layer/kernel"] == (20, 256)
    assert mimic2["embedding"] == (149, 512) and mimic2["prenet/dense_1/kernel"] == (512, 256)
    for shapes in (new, old, mimic2):  # the same decoder stack and post-net in every layout
        assert shapes[CELL0 + "/kernel"] == (512, 256)  # [attention GRU output; context]
        assert shapes["decoder/output_projection_wrapper/multi_rnn_cell/cell_1/gru_cell/gates/kernel"] == (512, 512)
        assert shapes["decoder/output_projection_wrapper/kernel"] == (256, 400)  # 80 mels x r = 5
        assert shapes["post_cbhg/dense/kernel"] == (80, 128) and shapes["dense/kernel"] == (256, 1025)
        assert "encoder_cbhg/dense/kernel" not in shapes  # the pre-net's 128 is already half of 256
        assert shapes["encoder_cbhg/conv_bank/conv1d_16/conv1d/kernel"] == (16, 128, 128)
        assert shapes["post_cbhg/proj_1/conv1d/kernel"] == (3, 8 * 128, 256)
        assert shapes["encoder_cbhg/bidirectional_rnn/bw/gru_cell/candidate/bias"] == (128,)


def test_layout_and_attention_must_agree():
    with pytest.raises(ValueError, match="location-sensitive"):
        tf1_variable_shapes(resolve_tacotron1_hparams("keithito"), "mimic2")
    with pytest.raises(ValueError, match="layout must be one of"):
        attention_cell_scopes("keithito-2019")


# -- checkpoints written in numpy ----------------------------------------------------------------------------------
def _variables(layout: str, seed: int = 0, **overrides) -> dict[str, np.ndarray]:
    hp = resolve_tacotron1_hparams(PRESET_OF[layout], **{**SMALL, **overrides})
    rng = np.random.default_rng(seed)
    return {PREFIX + n: rng.standard_normal(s).astype(np.float32) for n, s in tf1_variable_shapes(hp, layout).items()}


def _save(directory, tensors: dict, name: str = "model.ckpt-1000") -> str:
    prefix = os.path.join(os.fspath(directory), name)
    _write_tf1_checkpoint(prefix, tensors)
    return prefix


def _extras() -> dict[str, np.ndarray]:
    """What keithito's train.py saves beside the model: the global step and Adam's slots."""
    return {"global_step": np.array(1000, np.int64),
            PREFIX + "embedding/Adam": np.zeros((149, 8), np.float32),
            PREFIX + "embedding/Adam_1": np.zeros((149, 8), np.float32)}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_and_hparams_recovered_from_a_checkpoint(tmp_path, layout):
    tensors = {**_variables(layout, embed_depth=8), **_extras()}
    prefix = _save(tmp_path, tensors)
    inv = inspect_checkpoint(prefix)
    assert inv.family == "tacotron1" and inv.blocks == [] and inv.tacotron1.layout == layout
    hp = inv.tacotron1.hparams
    assert (hp.embed_depth, hp.prenet_depths, hp.encoder_depth, hp.attention_depth, hp.decoder_depth,
            hp.postnet_depth, hp.num_mels, hp.num_freq, hp.outputs_per_step, hp.n_symbols) == \
        (8, (12, 6), 14, 10, 16, 18, 5, 9, 3, 149)
    assert hp.attention == ("location_sensitive" if layout == "mimic2" else "bahdanau")
    assert hp.variant == PRESET_OF[layout]
    assert [n for n, _ in inv.optimizer] == sorted(["global_step", PREFIX + "embedding/Adam",
                                                    PREFIX + "embedding/Adam_1"])
    family, found, same = infer_layout_and_hparams({n: v.shape for n, v in tensors.items()})
    assert (family, found, same) == ("tacotron1", layout, hp)


def test_tf_before_1_2_spellings(tmp_path):
    """TF < 1.2 RNN cells wrote weights/biases (contrib's checkpoint_convert maps gru_cell/gates/weights ->
    gru_cell/gates/kernel, output_projection_wrapper/biases -> .../bias); tf.layers always wrote kernel/bias."""
    tensors = _variables("keithito-20180906")
    legacy = re.compile(r"(gates|candidate|output_projection_wrapper)/(kernel|bias)$")
    old = {legacy.sub(lambda m: m.group(1) + ("/weights" if m.group(2) == "kernel" else "/biases"), n): v
           for n, v in tensors.items()}
    assert PREFIX + CELL0 + "/weights" in old and PREFIX + "prenet/dense_1/kernel" in old
    assert PREFIX + "encoder_cbhg/bidirectional_rnn/fw/gru_cell/gates/biases" in old
    inv = inspect_checkpoint(_save(tmp_path, old))
    (tmp_path / "new").mkdir()
    assert inv.tacotron1.layout == "keithito-20180906"
    assert inv.tacotron1.hparams == inspect_checkpoint(_save(tmp_path / "new", tensors)).tacotron1.hparams
    # 7 GRUs (2 encoder, 2 post-net, the attention GRU, 2 decoder) x 4 variables, 2 output projections x 2
    assert len(inv.tacotron1.renamed) == 7 * 4 + 2 * 2
    both = {**{n: v.shape for n, v in tensors.items()}, PREFIX + CELL0 + "/weights": (28, 16)}
    with pytest.raises(Tacotron1ShapesError, match="both TF1 spellings"):
        canonical_names(both)


def test_mis_shaped_and_missing_variables_are_one_line(tmp_path, capsys):
    tensors = _variables("keithito-20180906")
    bad = dict(tensors)
    gru = PREFIX + CONCAT + "/decoder_prenet_wrapper/attention_wrapper/gru_cell/candidate/kernel"
    bad[gru] = bad[gru][:-1]
    with pytest.raises(Tacotron1ShapesError, match="candidate/kernel' has shape") as e:
        infer_layout_and_hparams({n: v.shape for n, v in bad.items()})
    assert len(str(e.value).splitlines()) == 1 and len(e.value.problems) == 1
    prefix = _save(tmp_path, bad)
    assert cli.main(["inspect", prefix]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gru_cell/candidate/kernel" in err and "Traceback" not in err
    missing = {n: v.shape for n, v in tensors.items() if not n.endswith("dense/kernel") or "post_cbhg" in n}
    with pytest.raises(Tacotron1ShapesError, match="missing variable 'dense/kernel'"):
        infer_layout_and_hparams(missing)
    odd = {n: v.shape for n, v in tensors.items() if "bahdanau_attention" not in n}
    with pytest.raises(Tacotron1ShapesError, match="no attention cell of a known layout"):
        infer_layout_and_hparams(odd)


def test_truncated_checkpoint_is_one_line(tmp_path, capsys):
    prefix = _save(tmp_path, _variables("mimic2"))
    data = prefix + ".data-00000-of-00001"
    with open(data, "rb+") as f:
        f.truncate(os.path.getsize(data) - 7)
    assert cli.main(["inspect", prefix]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_inspect_names_family_layout_and_hparams(tmp_path, capsys):
    prefix = _save(tmp_path, {**_variables("keithito-20180906", embed_depth=8), **_extras()})
    assert cli.main(["inspect", prefix]) == 0
    out = capsys.readouterr().out
    assert "family: Tacotron-1 (keithito/tacotron, layout 20180906)" in out
    assert "embed_depth=8, prenet_depths=[12, 6], encoder_depth=14, attention_depth=10, decoder_depth=16" in out
    assert "outputs_per_step=3, num_freq=9, attention=bahdanau" in out
    assert "preset: none" in out and "optimizer state (skipped): 3 variables" in out
    (tmp_path / "m").mkdir()
    assert cli.main(["inspect", _save(tmp_path / "m", _variables("mimic2"))]) == 0
    assert "family: Tacotron-1 (MycroftAI/mimic2, layout mimic2)" in capsys.readouterr().out


def test_presets_of_the_other_family_are_refused(tmp_path, capsys):
    t1 = _save(tmp_path, _variables("keithito-20170720"))
    assert cli.main(["inspect", t1, "--hparams", "rtvc"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'rtvc' is a Tacotron-2 preset" in err and "keithito, mimic2" in err
    assert cli.main(["inspect", t1, "--hparams", "keithito"]) == 0
    assert "--hparams keithito: sizes differ" in capsys.readouterr().out
    (tmp_path / "t2").mkdir()
    _, variables = small_variables("rtvc")
    t2 = _save(tmp_path / "t2", {f"Tacotron_model/inference/{n}": v for n, v in variables.items()})
    assert cli.main(["inspect", t2, "--hparams", "mimic2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'mimic2' is a Tacotron-1 preset" in err and "rayhane, rtvc" in err
    assert cli.main(["inspect", t2, "--hparams", "rtvc"]) == 0
    out = capsys.readouterr().out
    assert "whole model: Tacotron-2 (complete)" in out and "family: Tacotron-1" not in out
    family, layout, inferred = infer_layout_and_hparams({f"Tacotron_model/inference/{n}": v.shape
                                                         for n, v in variables.items()})
    assert (family, layout, inferred["speaker_embedding_size"]) == ("tacotron2", None, 6)
    with pytest.raises(ModelFamilyError, match="'foo' is not a preset"):
        check_preset_family("foo", "tacotron1")
