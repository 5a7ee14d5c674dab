"""Building the blocks from a TF1 checkpoint and writing them for Keras or PyTorch, atomically.

A checkpoint holding the **whole** Tacotron-2 (RTVC or Rayhane: ``inputs_embedding``, the attention and the memory
layer included) migrates as the model: ``Tacotron2`` is built in the target framework from the hparams the shapes
give (plus ``hparams`` / ``overrides`` for what they cannot tell), every variable is loaded strictly, and the file
carries the model's hparams (``Tacotron2.from_migrated``). A checkpoint holding only some blocks migrates block by
block.

File formats (both carry the same JSON block table, so either framework can rebuild the blocks):

* **Keras** (``--to keras``, e.g. ``model.weights.h5``): an HDF5 file. Root attributes
  ``speechblocks_format = "speechblocks.migrated.keras"``, ``format_version = 2``, ``model`` (whole-model files
  only: JSON ``{"class_name": "Tacotron2", "hparams", "n_symbols"}``), ``blocks`` (JSON:
  ``{block_path: {"class_name", "config", "input_size", "input_arg", "tf1_keys"}}``),
  ``source_checkpoint`` and ``use_ema``. One HDF5 group per block path (``decoder/decoder_LSTM`` is the
  group ``decoder`` > ``decoder_LSTM``) holding the Keras layer's variables, read back from the built
  and loaded layer with ``tf1_weights()``: one dataset per TF1 name relative to the block's scope, in
  the TF1 layout that is the library's exchange format. ``layer.load_tf1_weights({k: group[k][()] for
  k in tf1_keys})`` restores a layer by hand; :func:`load_migrated` does it for every block. A whole-model file
  holds every variable of the model this way: one dataset per TF1 name relative to ``Tacotron_model/inference/``
  (``inputs_embedding``, ``memory_layer/kernel``, ``decoder/Location_Sensitive_Attention/...``), so the block
  groups are the model's. Both frameworks read it (h5py; no TensorFlow needed on the torch side).
* **torch** (``--to torch``, e.g. ``model.pt``): ``torch.save`` of a plain dict ``{"speechblocks_format":
  "speechblocks.migrated.torch", "format_version": 2, "blocks": <the same JSON string>, "state_dicts":
  {block_path: module.state_dict()}}`` -- strings, ints and tensors only, so
  ``torch.load(path, weights_only=True)`` reads it; ``torch_layers.load_migrated`` rebuilds the modules. A
  whole-model file has ``"model"`` (the JSON above) and ``"model_state_dict"`` (``Tacotron2.state_dict()``) instead
  of ``state_dicts``; its blocks are the model's submodules.

Both are written to a temporary file in the output's directory and moved into place with
``os.replace``: a failed run leaves no partial file, and the checkpoint is only ever read.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable

import numpy as np

from ..atomic_files import atomic_path
from ..tacotron1_schema import check_preset_family
from ..tacotron2_schema import HParamsMismatchError, checkpoint_hparams
from .inventory import CheckpointInventory, RecognisedBlock, inspect_checkpoint
from .migrated_file import (
    FORMAT_VERSION,
    KERAS_FORMAT,
    TORCH_FORMAT,
    MigratedFileError,
    content_digest,
    model_entry,
    model_from_keras_file,
    read_block_table,
    tensor_digest,
)
from .schema import BLOCK_CLASSES, MigrationError, NoTacotronBlocksError
from .tacotron1 import describe as describe_tacotron1
from .tacotron1 import tacotron1_checkpoint_hparams, tacotron1_checkpoint_variables, tacotron1_model_entry

__all__ = ["MigrationError", "MigrationReport", "BlockReport", "migrate_checkpoint", "load_migrated",
           "load_keras_model", "read_block_table", "MigratedFileError", "KERAS_FORMAT", "TORCH_FORMAT",
           "FORMAT_VERSION"]


@dataclasses.dataclass
class BlockReport:
    path: str
    class_name: str
    config: dict | None
    input_size: int | None
    input_arg: str
    n_params: int
    status: str  # "migrated", "checked" (dry run) or "skipped"
    notes: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


@dataclasses.dataclass
class MigrationReport:
    """What a migration did, block by block; ``str(report)`` is the command line's report."""

    checkpoint: str
    to: str
    out: str | None
    dry_run: bool
    strict: bool
    use_ema: bool
    blocks: list[BlockReport]
    unmigrated: list[tuple[str, tuple[int, ...]]]
    optimizer_variables: int
    seconds: float = 0.0
    model: str | None = None  # "Tacotron2 (...)" when the whole model was migrated
    model_notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def migrated(self) -> list[str]:
        return [b.path for b in self.blocks if b.status in ("migrated", "checked")]

    def __str__(self) -> str:
        verb = "checked (dry run, nothing written)" if self.dry_run else f"written to {self.out}"
        what = (f"{len(self.migrated)} of {len(self.blocks)} block(s)" if self.blocks or self.model is None
                else "the whole model")
        lines = [f"migration of {self.checkpoint} -> {self.to}: {what} {verb}"
                 f"{'; weights from EMA shadows' if self.use_ema else ''}"]
        if self.model is not None:
            lines.append(f"  whole model: {self.model}")
        lines += [f"  ! {n}" for n in self.model_notes]
        for b in self.blocks:
            cfg = "" if b.config is None else ", ".join(
                [f"{b.input_arg}={b.input_size}"] + [f"{k}={v!r}" for k, v in b.config.items() if k != "tf1_scope"])
            lines.append(f"  {b.status:8s} {b.path:36s} {b.class_name:20s} {b.n_params:>10,d} params  {cfg}")
            lines += [f"           ! {n}" for n in b.notes]
        lines.append(f"  unmigrated variables (not blocks of this library): {len(self.unmigrated)}")
        lines += [f"           {n} {list(s)}" for n, s in self.unmigrated]
        lines.append(f"  optimizer variables skipped: {self.optimizer_variables}")
        lines.append(f"  total time {self.seconds:.1f} s")
        return "\n".join(lines)


def _checkpoint_files(prefix: str) -> list[str]:
    import glob

    return glob.glob(glob.escape(prefix) + ".*")



# -- the target framework -------------------------------------------------------------------------
# This driver is the application layer: it imports the framework it migrates to, by name and only here (the import
# graph sees these edges); the frameworks never import it (tests/test_import_graph.py).
def _block_class(to: str, class_name: str):
    if class_name not in BLOCK_CLASSES:
        raise ValueError(f"unknown block class {class_name!r}")
    if to == "keras":
        from tf_layers.checkpoint import MIGRATED_BLOCK_CLASSES

        return MIGRATED_BLOCK_CLASSES[class_name]
    import torch_layers

    return getattr(torch_layers, class_name)


def _model_class(to: str, name: str = "Tacotron2"):
    if to == "keras":
        import tf_layers

        return getattr(tf_layers, name)
    import torch_layers

    return getattr(torch_layers, name)


def _build_keras(entry: dict, weights: dict):
    from tf_layers.checkpoint import build_migrated_block

    return build_migrated_block(entry, weights)


def _build_torch(entry: dict, weights: dict | None = None):
    cls = _block_class("torch", entry["class_name"])
    module = cls(entry["input_size"], **entry["config"])
    if weights is not None:
        module.load_tf1_weights(weights, strict=True)
    return module.eval()


def _loaded_block(to: str, entry: dict, weights: dict):
    """``(block, what the file stores of it)``: the block built in ``to`` with its TF1 weights loaded strictly."""
    if to == "keras":
        block = _build_keras(entry, weights)
        return block, block.tf1_weights()
    block = _build_torch(entry, weights)
    return block, block.state_dict()


def _model_data(to: str, model) -> dict:
    return model.tf1_weights() if to == "keras" else model.state_dict()


def _check_classes(to: str, blocks) -> list[str]:
    problems = []
    for b in blocks:
        try:
            _block_class(to, b.class_name)
        except (ImportError, AttributeError, KeyError) as e:
            problems.append(f"{b.path}: the {to} class {b.class_name} is not available ({type(e).__name__}: {e})")
    return problems


def _entry(block) -> dict:
    return {"class_name": block.class_name, "config": block.config, "input_size": block.input_size,
            "input_arg": block.kind.input_arg, "tf1_keys": sorted(block.expected_shapes())}


def _read_weights(inv: CheckpointInventory, variables: dict[str, str], allow_nonfinite: bool) -> dict[str, np.ndarray]:
    """``{key: array}`` of ``{key: checkpoint name}``, through the inventory's validated reader (checksums, NaN/inf
    policy, float16/float64 cast to float32, non-floating weights refused)."""
    return inv.reader.read(variables, allow_nonfinite=allow_nonfinite, float_only=True)




class _KerasWriter:
    def __init__(self, path: str, entries: dict, inv: CheckpointInventory):
        import h5py

        self.f = h5py.File(path, "w")
        self.f.attrs["speechblocks_format"] = KERAS_FORMAT
        self.f.attrs["format_version"] = FORMAT_VERSION
        self.f.attrs["source_checkpoint"] = os.path.abspath(inv.checkpoint)
        self.f.attrs["use_ema"] = bool(inv.use_ema)
        self.entries = entries
        self.digests: dict[str, str] = {}  # the readers check the file's sha256 (migrated_file.content_digest)
        self.model_json = None

    def _dataset(self, name: str, value):
        value = np.asarray(value)
        self.f.create_dataset(name, data=value)
        self.digests[name] = tensor_digest(name, value)

    def add(self, path: str, tf1_weights: dict):
        for key in sorted(tf1_weights):
            self._dataset(f"{path}/{key}", tf1_weights[key])
        self.entries[path]["tf1_keys"] = sorted(tf1_weights)

    def add_model(self, model_json: str, tf1_weights: dict):
        self.f.attrs["model"] = self.model_json = model_json
        for name in sorted(tf1_weights):
            self._dataset(name, tf1_weights[name])

    def abandon(self):
        self.f.close()

    def close(self):
        blocks = json.dumps(self.entries, sort_keys=True)
        self.f.attrs["blocks"] = blocks
        self.f.attrs["sha256"] = content_digest(blocks, self.model_json, self.digests)
        self.f.close()


class _TorchWriter:
    # torch is imported here, inside the torch output path only: `import tf_layers` (and the Keras path of
    # the migration) must never import torch (docs/ARCHITECTURE.md, layers), so nothing at module level may import it.
    def __init__(self, path: str, entries: dict, inv: CheckpointInventory):
        self.path = path
        self.entries = entries
        self.state_dicts = {}
        self.meta = {"source_checkpoint": os.path.abspath(inv.checkpoint), "use_ema": bool(inv.use_ema)}
        self.model = None

    def add(self, path: str, state_dict: dict):
        self.state_dicts[path] = {k: v.detach().cpu().contiguous() for k, v in state_dict.items()}

    def add_model(self, model_json: str, state_dict: dict):
        self.model = (model_json, {k: v.detach().cpu().contiguous() for k, v in state_dict.items()})

    def abandon(self):
        pass

    def close(self):
        import torch

        payload = {"speechblocks_format": TORCH_FORMAT, "format_version": FORMAT_VERSION,
                   "blocks": json.dumps(self.entries, sort_keys=True), "state_dicts": self.state_dicts,
                   "source_checkpoint": self.meta["source_checkpoint"], "use_ema": self.meta["use_ema"]}
        if self.model is not None:
            payload["model"], payload["model_state_dict"] = self.model
        torch.save(payload, self.path)



@contextlib.contextmanager
def _output(out, inv: CheckpointInventory, to: str, entries: dict):
    """The writer of ``to`` on a temporary file in ``out``'s directory; it replaces ``out`` only when the block ends
    without an error (then nothing is left behind), and it may never be one of the checkpoint's files."""
    with atomic_path(out, protected=_checkpoint_files(inv.checkpoint), protected_name="input checkpoint",
                     fsync=True) as tmp:
        writer = (_KerasWriter if to == "keras" else _TorchWriter)(tmp, entries, inv)
        try:
            yield writer
        except BaseException:
            writer.abandon()
            raise
        writer.close()


def migrate_checkpoint(checkpoint, to: str, out=None, *, use_ema: bool = False, strict: bool = True,
                       dry_run: bool = False, progress: Callable[[str], None] | None = None, hparams=None,
                       overrides: dict | None = None, allow_nonfinite: bool = False) -> MigrationReport:
    """Migrates a TF1 checkpoint's whole Tacotron-2 -- or, when it holds only some blocks, every block -- to
    Keras or PyTorch.

    Whole model (the checkpoint holds ``inputs_embedding`` and every variable of a Tacotron-2): ``Tacotron2`` is
    built from the hparams of ``speechblocks.checkpoint_hparams`` (sizes from the shapes; the rest from
    ``hparams``, by default the RTVC preset with a speaker embedding, else Rayhane's; then ``overrides``), every
    variable loaded strictly, and the file carries the hparams (``Tacotron2.from_migrated``). Otherwise each
    recognised block is built in the target framework from its inferred config, loaded with its
    TF1 weights (``load_tf1_weights(strict=True)``) and written to ``out`` (see the module docstring for
    the formats). Strict by default: any recognised block with a missing, mis-shaped or unknown
    variable fails the whole migration with one :class:`MigrationError` listing every problem, before
    anything is written.

    Args:
        checkpoint: TF1 checkpoint prefix, ``.index`` file or directory.
        to: ``"keras"`` or ``"torch"``.
        out: output file (``.weights.h5`` for Keras, ``.pt`` for torch); unused when ``dry_run``.
        use_ema: take weights from ``<var>/ExponentialMovingAverage`` shadows where they exist.
        strict: when False, blocks with missing or mis-shaped variables are skipped and unknown
            variables inside a block are ignored; both are reported.
        dry_run: build and load every block, write nothing.
        progress: called with one line per block (the command line prints it to stderr).
        hparams: whole model only: a preset name, a mapping of original hparam names or ``Tacotron2HParams``
            for what the shapes cannot tell (its sizes must agree with the checkpoint).
        overrides: whole model only: hparams by original name, applied last (e.g. ``{"max_iters": 1000}``).
        allow_nonfinite: migrate variables holding NaN or inf (with a ``NonFiniteWeightsWarning``) instead of
            refusing them.

    The checkpoint is validated, then decoded in numpy (index checksums, shard sizes, the checksums of the
    migrated variables' bytes); float16/bfloat16/float64 variables are cast to float32 with a
    ``CheckpointDtypeWarning``; non-floating weights are refused. Nothing is written unless everything succeeds.

    Returns:
        a :class:`MigrationReport`.

    Raises:
        FileNotFoundError (``CheckpointNotFoundError``), ValueError (``CheckpointReadError``,
        ``NonFiniteWeightsError``, ``NoTacotronBlocksError``, ``MigrationError``): with a one-line message for a
        missing path, a truncated, corrupted or hostile checkpoint (naming the file and the tensor), NaN/inf
        weights, or a checkpoint without any Tacotron-2 block.
    """
    t_start = time.perf_counter()
    if to not in ("keras", "torch"):
        raise ValueError(f"`to` must be 'keras' or 'torch'; got {to!r}")
    if out is None and not dry_run:
        raise ValueError("`out` (the output file) is required unless dry_run=True")
    inv = inspect_checkpoint(checkpoint, use_ema=use_ema, allow_nonfinite=allow_nonfinite)
    if inv.family == "tacotron1":
        return _migrate_tacotron1(inv, to, out, dry_run, progress, hparams, overrides, t_start, allow_nonfinite)
    if not inv.blocks:
        raise NoTacotronBlocksError(f"checkpoint {inv.checkpoint!r} holds no Tacotron-2 block")
    if inv.model is not None and inv.model.complete:
        return _migrate_model(inv, to, out, dry_run, progress, hparams, overrides, t_start, allow_nonfinite)
    model_notes = _block_by_block_notes(inv, hparams, overrides)
    reports, todo = _plan_blocks(inv, to, strict, use_ema)
    entries = {b.path: _entry(b) for b, _ in todo}
    status = "checked" if dry_run else "migrated"
    if dry_run:
        _migrate_blocks(inv, to, todo, reports, entries, None, status, strict, progress, allow_nonfinite)
    else:
        with _output(out, inv, to, entries) as writer:
            _migrate_blocks(inv, to, todo, reports, entries, writer, status, strict, progress, allow_nonfinite)
    return MigrationReport(inv.checkpoint, to, None if dry_run else os.path.abspath(out), dry_run, strict, use_ema,
                           reports, inv.unmigrated, len(inv.optimizer), time.perf_counter() - t_start,
                           model_notes=model_notes)


# -- block by block ------------------------------------------------------------------------------
def _block_by_block_notes(inv: CheckpointInventory, hparams, overrides) -> list[str]:
    """The report's notes of a checkpoint that does not migrate as a whole model."""
    notes = []
    if inv.model is not None:
        notes.append("the checkpoint's model is incomplete, so it migrates block by block: "
                     + "; ".join(inv.model.problems[:5]) + (" ..." if len(inv.model.problems) > 5 else ""))
    if hparams is not None or overrides:
        notes.append("hparams/overrides ignored: they apply to a whole model only")
    return notes


def _plan_blocks(inv: CheckpointInventory, to: str, strict: bool,
                 use_ema: bool) -> tuple[list[BlockReport], list[tuple[RecognisedBlock, BlockReport]]]:
    """``(reports, todo)``: a report for every recognised block (``"skipped"`` until it migrates) and the
    ``(block, report)`` pairs to migrate.

    Raises:
        MigrationError: ``strict`` and any problem (the checkpoint's or a class the target lacks); no block left.
    """
    class_problems = _check_classes(to, inv.blocks)
    problems = inv.problems() + class_problems
    if strict and problems:
        raise MigrationError(inv.checkpoint, problems)
    unavailable = {p.split(":", 1)[0] for p in class_problems}
    reports, todo = [], []
    for b in inv.blocks:
        report = BlockReport(b.path, b.class_name, b.config, b.input_size, b.kind.input_arg, b.n_params, "skipped")
        if b.path in unavailable:
            report.notes.append(f"skipped: no {to} implementation of {b.class_name} is available")
        elif not b.loadable:
            report.notes += [f"skipped: {p}" for p in b.problems]
        else:
            report.notes += [f"ignored unknown variable {k!r} {list(b.shapes[k])}" for k in b.unexpected]
            todo.append((b, report))
        if use_ema and b.loadable:
            report.notes.append(f"{b.ema_used} of {len(b.variables)} variables from EMA shadows")
        reports.append(report)
    if not todo:
        raise MigrationError(inv.checkpoint, ["no block can be migrated"] + problems)
    return reports, todo


def _migrate_blocks(inv: CheckpointInventory, to: str, todo, reports: list[BlockReport], entries: dict, writer,
                    status: str, strict: bool, progress, allow_nonfinite: bool) -> None:
    """Builds and loads every block of ``todo`` in ``to``, one at a time, and hands it to ``writer`` (``None``: a
    dry run). A block refusing its weights fails the migration when ``strict`` (every such problem listed), else it
    is skipped and dropped from ``entries`` (the writer's block table)."""
    load_problems: list[str] = []
    for b, report in todo:
        t0 = time.perf_counter()
        weights = _read_weights(inv, b.variables, allow_nonfinite)
        try:
            block, data = _loaded_block(to, entries[b.path], weights)
        except ValueError as e:  # the block itself disagrees with the checkpoint
            if strict:
                load_problems.append(f"{b.path}: {e}")
            else:
                report.notes.append(f"skipped: {e}")
                entries.pop(b.path)
            continue
        del weights
        if writer is not None:
            writer.add(b.path, data)
        del block, data
        report.status = status
        report.seconds = time.perf_counter() - t0
        if progress is not None:
            progress(f"{report.status} {b.path} ({b.class_name}, {b.n_params:,d} params) in {report.seconds:.1f} s")
    if load_problems:
        raise MigrationError(inv.checkpoint, load_problems)
    if not entries:
        raise MigrationError(inv.checkpoint, ["no block can be migrated"] + [n for r in reports for n in r.notes])


# -- the whole model -----------------------------------------------------------------------------
def _migrate_model(inv: CheckpointInventory, to: str, out, dry_run: bool, progress, hparams, overrides,
                   t_start: float, allow_nonfinite: bool = False) -> MigrationReport:
    """The whole-model path of :func:`migrate_checkpoint`."""
    found = inv.model
    if isinstance(hparams, str):
        check_preset_family(hparams, "tacotron2", f"checkpoint {inv.checkpoint!r}")
    try:
        hp = checkpoint_hparams(found.shapes, hparams, overrides, source=f"checkpoint {inv.checkpoint!r}")
    except HParamsMismatchError:
        raise  # one line naming the cause, every mismatch in its .problems; nothing was written
    except ValueError as e:
        raise MigrationError(inv.checkpoint, str(e).splitlines()) from None
    t0 = time.perf_counter()
    weights = _read_weights(inv, found.variables, allow_nonfinite)
    model = _model_class(to)(hp)
    try:
        model.load_tf1_weights(weights, strict=True)
    except ValueError as e:
        raise MigrationError(inv.checkpoint, [f"Tacotron2: {e}"]) from None
    del weights
    if to == "torch":
        model.eval()
    n_params = sum(int(np.prod(s)) for s in found.shapes.values())
    status = "checked" if dry_run else "migrated"
    if progress is not None:
        progress(f"{status} the whole Tacotron2 ({n_params:,d} params) in {time.perf_counter() - t0:.1f} s")
    entries, reports = {}, []
    for b in inv.blocks:
        entries[b.path] = _entry(b)
        reports.append(BlockReport(b.path, b.class_name, b.config, b.input_size, b.kind.input_arg, b.n_params,
                                   status))
        if inv.use_ema:
            reports[-1].notes.append(f"{b.ema_used} of {len(b.variables)} variables from EMA shadows")
    if not dry_run:
        with _output(out, inv, to, entries) as writer:
            writer.add_model(model_entry(hp), _model_data(to, model))
    preset = f"preset {found.preset}" if found.preset else "sizes of no preset"
    desc = (f"Tacotron2 ({hp.variant.upper() if hp.variant == 'rtvc' else 'Rayhane'}, {preset}, "
            f"r={hp.outputs_per_step}, speaker_embedding_size={hp.speaker_embedding_size}, n_symbols={hp.n_symbols}, "
            f"{n_params:,d} params, {len(found.shapes)} variables)")
    return MigrationReport(inv.checkpoint, to, None if dry_run else os.path.abspath(out), dry_run, True, inv.use_ema,
                           reports, inv.unmigrated, len(inv.optimizer), time.perf_counter() - t_start, model=desc)


def _migrate_tacotron1(inv: CheckpointInventory, to: str, out, dry_run: bool, progress, hparams, overrides,
                       t_start: float, allow_nonfinite: bool) -> MigrationReport:
    """A keithito/tacotron or mimic2 checkpoint: always the whole ``Tacotron1`` (:mod:`.tacotron1`)."""
    found = inv.tacotron1
    hp = tacotron1_checkpoint_hparams(found, hparams, overrides, source=f"checkpoint {inv.checkpoint!r}")
    t0 = time.perf_counter()
    weights = _read_weights(inv, tacotron1_checkpoint_variables(inv), allow_nonfinite)
    model = _model_class(to, "Tacotron1")(hp, found.layout)
    try:
        model.load_tf1_weights(weights, strict=True)
    except ValueError as e:
        raise MigrationError(inv.checkpoint, [f"Tacotron1: {e}"]) from None
    del weights
    if to == "torch":
        model.eval()
    desc = describe_tacotron1(hp, found.layout, found.shapes)
    status = "checked" if dry_run else "migrated"
    if progress is not None:
        progress(f"{status} the whole {desc.split(' (')[0]} in {time.perf_counter() - t0:.1f} s")
    if not dry_run:
        with _output(out, inv, to, {}) as writer:
            writer.add_model(tacotron1_model_entry(hp, found.layout), _model_data(to, model))
    notes = [f"{len(found.renamed)} variable(s) read under their TF < 1.2 names (weights/biases)"] if found.renamed \
        else []
    return MigrationReport(inv.checkpoint, to, None if dry_run else os.path.abspath(out), dry_run, True, inv.use_ema,
                           [], inv.unmigrated, len(inv.optimizer), time.perf_counter() - t_start, model=desc,
                           model_notes=notes)


# -- reading a migrated Keras file: the Keras side's (tf_layers.checkpoint), under the package's names ------------
def load_migrated(path) -> dict:
    """``tf_layers.checkpoint.load_migrated`` (see there): ``{block_path: keras layer}`` of a file written by
    ``speechblocks migrate --to keras``; imports TensorFlow.

    Raises:
        FileNotFoundError: no such file.
        MigratedFileError (a ``ValueError``): not a migrated Keras file, damage, a config contradicting the tensors.
    """
    from tf_layers.checkpoint import load_migrated as load

    return load(path)


def load_keras_model(path, hparams=None, overrides: dict | None = None, cls=None, _file=None,
                     model_kwargs: dict | None = None):
    """The whole model of a migrated Keras file, as ``tf_layers.Tacotron2.from_migrated`` (``cls``: by default that
    class); ``model_kwargs`` go to the constructor (``sync_batch_norm``, ``loss_reduction``).

    Raises:
        MigratedFileError (a ``ValueError``): as :func:`load_migrated`, plus a file of blocks only and hparams
            contradicting the tensors; nothing is returned then.
    """
    return model_from_keras_file(path, _model_class("keras") if cls is None else cls, hparams, overrides,
                                 model_kwargs, migrated=_file)
