"""Sorting a TF1 checkpoint's variables: recognised blocks, optimizer state, EMA shadows, the rest.

The checkpoint is validated first (index structure and checksums, shard sizes, then the checksums and NaN/inf
of the variables that would be migrated: :mod:`speechblocks.tf1_checkpoint_reader`); the variable list (names,
shapes, dtypes) comes from the validated index, the values later, block by block, decoded in numpy by
:mod:`.migrate` (no TensorFlow).
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from ..tacotron1_schema import MODEL_SCOPE as TACOTRON1_SCOPE
from ..tacotron1_schema import Tacotron1Found, find_tacotron1
from ..tacotron2_schema import checkpoint_hparams, infer_hparams, matching_preset, parameters_by_part
from ..tf1_checkpoint_file import CheckpointError
from ..tf1_checkpoint_reader import TF1CheckpointReader
from .schema import BLOCK_KINDS, BlockKind, ConfigInferenceError, NoTacotronBlocksError

__all__ = ["CheckpointInventory", "RecognisedBlock", "ModelFound", "inspect_checkpoint", "open_checkpoint",
           "EMA_SUFFIX", "is_optimizer_variable", "CheckpointReadError"]

EMA_SUFFIX = "/ExponentialMovingAverage"

_OPTIMIZER_PATTERNS = (
    re.compile(r"(^|/)(Adam|Adam_\d+|Momentum|RMSProp|RMSProp_\d+|Adagrad|Adadelta|Adadelta_\d+)$"),
    re.compile(r"(^|/)(global_step|beta1_power|beta2_power)(_\d+)?$"),
)


def is_optimizer_variable(name: str) -> bool:
    """True for optimizer state: ``.../Adam``, ``.../Adam_1``, ``beta1_power``, ``global_step`` ..."""
    return any(p.search(name) for p in _OPTIMIZER_PATTERNS)


#: the checkpoint exists but cannot be read (truncated, corrupted, hostile): one class for the whole library
CheckpointReadError = CheckpointError


@dataclasses.dataclass
class RecognisedBlock:
    """One block found in the checkpoint.

    Attributes:
        kind: the :class:`~.schema.BlockKind`.
        full_scope: the block's scope in the checkpoint (``Tacotron_model/inference/encoder_LSTM``).
        config: constructor keywords (``tf1_scope`` included), or ``None`` when they cannot be inferred.
        input_size: input feature size (the torch constructor's first argument), or ``None``.
        variables: ``{relative TF1 name: full checkpoint name}`` of the variables that will be read
            (the EMA shadow's name when ``use_ema`` and a shadow exists).
        shapes: ``{relative TF1 name: shape}`` of every variable under the block's scope.
        missing, mis_shaped, unexpected: what the strict check found (relative names / messages).
        problems: every problem, one message each.
    """

    kind: BlockKind
    full_scope: str
    config: dict | None
    input_size: int | None
    variables: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    missing: list[str] = dataclasses.field(default_factory=list)
    mis_shaped: list[str] = dataclasses.field(default_factory=list)
    unexpected: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    ema_used: int = 0

    @property
    def path(self) -> str:
        return self.kind.path

    @property
    def class_name(self) -> str:
        return self.kind.class_name

    @property
    def n_params(self) -> int:
        """Number of scalars in the block's expected variables."""
        expected = self.expected_shapes()
        shapes = expected if expected else self.shapes
        return int(sum(int(np.prod(s)) for s in shapes.values()))

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        if self.config is None:
            return {}
        return self.kind.expected(self.config, self.input_size)

    @property
    def loadable(self) -> bool:
        """True when the block can be built and fully loaded (extra variables are ignorable)."""
        return self.config is not None and not self.missing and not self.mis_shaped and not self._config_problems

    @property
    def _config_problems(self) -> list[str]:
        return [] if self.config is None else self.kind.config_problems(self.config, self.input_size)

    def describe_config(self) -> str:
        if self.config is None:
            return "(config not inferable)"
        items = [f"{self.kind.input_arg}={self.input_size}"]
        items += [f"{k}={v!r}" for k, v in self.config.items() if k != "tf1_scope"]
        return ", ".join(items)


@dataclasses.dataclass
class ModelFound:
    """The whole Tacotron-2 a checkpoint holds (its ``inputs_embedding`` marks it), beside its blocks.

    Attributes:
        shapes: ``{name relative to the model prefix: shape}`` of every model variable under the prefix.
        variables: ``{relative name: full checkpoint name}`` to read (the EMA shadow's name when ``use_ema``).
        inferred: the hparams the shapes determine (``speechblocks.infer_hparams``), or ``None``.
        preset: the preset whose default sizes give exactly these variables (``"rtvc"``, ``"rayhane"``), or ``None``.
        problems: why the variables do not form a model of the inferred hparams (empty when they do).
    """

    shapes: dict[str, tuple[int, ...]]
    variables: dict[str, str]
    inferred: dict | None
    preset: str | None
    problems: list[str]

    @property
    def complete(self) -> bool:
        """True when the variables are exactly those of a Tacotron-2 of the inferred hparams."""
        return self.inferred is not None and not self.problems

    def parameters_by_part(self) -> dict[str, int]:
        return parameters_by_part(self.shapes)

    def describe(self) -> str:
        """One line: variant, matching preset, r, speaker embedding size, n_symbols, predict_linear."""
        if self.inferred is None:
            return "a Tacotron-2 model whose hparams cannot be inferred"
        h = self.inferred
        emb = h.get("speaker_embedding_size")
        return (f"{'RTVC (speaker embedding)' if emb else 'Rayhane (no speaker embedding)'}; preset "
                f"{self.preset or 'none (sizes differ from both presets)'}; r (outputs_per_step)="
                f"{h.get('outputs_per_step')}, speaker_embedding_size={emb or 0}, n_symbols={h.get('n_symbols')}, "
                f"num_mels={h.get('num_mels')}, predict_linear={h.get('predict_linear')}")


def _find_model(prefix: str, model_names: list[str], shape_map: dict, ema: dict, use_ema: bool) -> ModelFound | None:
    members = {n[len(prefix):]: n for n in model_names if n.startswith(prefix)}
    if "inputs_embedding" not in members:
        return None
    shapes = {rel: shape_map[n] for rel, n in members.items()}
    variables = {rel: (ema[n] if use_ema and n in ema else n) for rel, n in members.items()}
    inferred, problems = None, []
    try:
        inferred = infer_hparams(shapes)
        checkpoint_hparams(shapes)
    except ValueError as e:
        lines = str(e).splitlines()
        problems = [p.strip()[2:] if p.strip().startswith("- ") else p for p in lines[1:]] or lines
    return ModelFound(shapes, variables, inferred, matching_preset(shapes) if inferred else None, problems)


@dataclasses.dataclass
class CheckpointInventory:
    """Everything ``speechblocks inspect`` reports about a checkpoint.

    Attributes:
        checkpoint: the resolved checkpoint prefix.
        prefix: the model prefix the blocks sit under (``"Tacotron_model/inference/"`` or ``""``).
        blocks: recognised blocks, in :data:`~.schema.BLOCK_KINDS` order.
        unmigrated: ``[(name, shape)]`` of model variables outside every recognised block.
        optimizer: ``[(name, shape)]`` of optimizer state (skipped).
        ema_shadows: ``{variable name: shadow name}`` of ExponentialMovingAverage shadows.
        use_ema: whether block weights are read from the shadows.
        dtypes: ``{name: numpy dtype}`` of every variable.
        model: the whole Tacotron-2 when the checkpoint holds one (:class:`ModelFound`), else ``None``; its
            variables outside the blocks (embedding, attention, memory layer) are then not "unmigrated".
        tacotron1: the Tacotron-1 model (keithito/tacotron, mimic2) when the checkpoint holds one under
            ``model/inference/`` (:class:`~speechblocks.tacotron1_schema.Tacotron1Found`: layout, hparams), else
            ``None``; ``blocks`` is then empty (no Tacotron-1 block migrates yet) and ``unmigrated`` lists the
            variables outside the model.
    """

    checkpoint: str
    prefix: str
    blocks: list[RecognisedBlock]
    unmigrated: list[tuple[str, tuple[int, ...]]]
    optimizer: list[tuple[str, tuple[int, ...]]]
    ema_shadows: dict[str, str]
    use_ema: bool
    dtypes: dict[str, np.dtype]
    model: ModelFound | None = None
    reader: TF1CheckpointReader | None = dataclasses.field(default=None, repr=False, compare=False)
    tacotron1: Tacotron1Found | None = None

    @property
    def family(self) -> str:
        """``"tacotron1"`` for a keithito/mimic2 checkpoint, else ``"tacotron2"``."""
        return "tacotron1" if self.tacotron1 is not None else "tacotron2"

    def problems(self) -> list[str]:
        """Every problem of every block, prefixed with its block path."""
        return [f"{b.path}: {p}" for b in self.blocks for p in b.problems]

    def optimizer_size(self) -> tuple[int, int]:
        """``(number of scalars, bytes)`` of the optimizer state."""
        n = sum(int(np.prod(s)) for _, s in self.optimizer)
        nbytes = sum(int(np.prod(s)) * self.dtypes[name].itemsize for name, s in self.optimizer)
        return n, nbytes

    def block(self, path: str) -> RecognisedBlock:
        for b in self.blocks:
            if b.path == path:
                return b
        raise KeyError(path)


def open_checkpoint(path) -> tuple[str, TF1CheckpointReader]:
    """``(resolved prefix, reader)`` of a TF1 checkpoint whose index and data shard sizes were validated before
    TensorFlow touched them (:mod:`speechblocks.tf1_checkpoint_file`).

    Raises:
        CheckpointNotFoundError (a ``FileNotFoundError``): nothing at ``path``, a missing ``.index``, a ``checkpoint``
            state file pointing nowhere.
        CheckpointReadError (a ``ValueError``): an index or data shard that is empty, truncated, corrupted, a
            directory, or not a checkpoint's; one line naming the file and the problem.
    """
    reader = TF1CheckpointReader(path)
    return reader.prefix, reader


def _match_shadows(shadows: dict[str, str], model: set[str]) -> tuple[dict[str, str], list[str]]:
    """``({model variable: shadow}, [shadows of no model variable])``. A shadow created inside a scope repeats that
    scope (``Tacotron_model/Tacotron_model/inference/.../ExponentialMovingAverage``): it belongs to the model
    variable its name ends with."""
    out, orphans = {}, []
    for base, shadow in shadows.items():
        parts = base.split("/")
        for i in range(len(parts)):
            candidate = "/".join(parts[i:])
            if candidate in model:
                out.setdefault(candidate, shadow)
                break
        else:
            orphans.append(shadow)
    return out, orphans


def _find_prefix(names: list[str]) -> str:
    votes: dict[str, set[str]] = {}
    for name in names:
        for kind in BLOCK_KINDS:
            b = kind.path + "/"
            if name.startswith(b):
                votes.setdefault("", set()).add(kind.path)
                continue
            i = name.find("/" + b)
            if i >= 0:
                votes.setdefault(name[: i + 1], set()).add(kind.path)
    if not votes:
        return None
    return max(votes, key=lambda p: (len(votes[p]), -len(p)))


def _analyse_block(kind: BlockKind, full_scope: str, shapes: dict, full_names: dict, ema: dict,
                   use_ema: bool) -> RecognisedBlock:
    block = RecognisedBlock(kind, full_scope, None, None, {}, shapes)
    try:
        block.config, block.input_size = kind.infer(shapes)
    except ConfigInferenceError as e:
        block.problems += [f"cannot infer the configuration: {p}" for p in e.problems]
        block.unexpected = []
        block.variables = dict(full_names)
        return block
    expected = kind.expected(block.config, block.input_size)
    block.problems += block._config_problems
    for key, shape in expected.items():
        if key not in shapes:
            block.missing.append(key)
            block.problems.append(f"missing variable {key!r} (expected shape {list(shape)})")
        elif tuple(shapes[key]) != tuple(shape):
            block.mis_shaped.append(key)
            block.problems.append(f"variable {key!r} has shape {list(shapes[key])}, expected {list(shape)}")
    for key in sorted(shapes):
        if key not in expected:
            block.unexpected.append(key)
            block.problems.append(f"unknown variable {key!r} (shape {list(shapes[key])}) inside the block")
    for key in expected:
        if key in full_names:
            name = full_names[key]
            if use_ema and name in ema:
                block.variables[key] = ema[name]
                block.ema_used += 1
            else:
                block.variables[key] = name
    return block


def _tacotron1_inventory(resolved, reader, model, shape_map, orphan_shadows, optimizer, ema, use_ema, dtypes
                         ) -> CheckpointInventory:
    """The inventory of a checkpoint without a Tacotron-2 prefix: its Tacotron-1 model, or no Tacotron at all."""
    found = find_tacotron1({n: shape_map[n] for n in model}, f"checkpoint {resolved!r}")
    if found is None:
        raise NoTacotronBlocksError(f"checkpoint {resolved!r} holds no Tacotron-2 block (looked for "
                                    + ", ".join(k.path for k in BLOCK_KINDS) + "; "
                                    f"{len(model)} model variables, e.g. {model[:3]})")
    rest = [(n, shape_map[n]) for n in model if not n.startswith(TACOTRON1_SCOPE + "/")]
    rest += [(n, shape_map[n]) for n in orphan_shadows]
    return CheckpointInventory(resolved, TACOTRON1_SCOPE + "/", [], rest, optimizer, ema, use_ema, dtypes, None,
                               reader, found)


def inspect_checkpoint(path, use_ema: bool = False, allow_nonfinite: bool = False) -> CheckpointInventory:
    """Recognises every Tacotron-2 block a TF1 checkpoint holds and infers its constructor config, or the
    Tacotron-1 model (keithito/tacotron, mimic2: family, layout and hparams) it holds.

    Works with the ``Tacotron_model/inference/`` prefix (Rayhane-mamah/Tacotron-2, the TF1
    Real-Time-Voice-Cloning synthesizer) and with blocks saved under bare scopes. Optimizer state
    (``…/Adam``, ``…/Adam_1``, also under a doubled ``Tacotron_model/Tacotron_model/`` prefix,
    ``beta*_power``, ``global_step``) is recognised and skipped; ``<var>/ExponentialMovingAverage``
    shadows replace the raw weights when ``use_ema``.

    Args:
        path: checkpoint prefix (``model.ckpt-1000``), its ``.index`` file, or a directory.
        use_ema: read block weights from their ExponentialMovingAverage shadows where they exist.
        allow_nonfinite: warn (``NonFiniteWeightsWarning``) instead of raising when the variables that would be
            migrated hold NaN or inf.

    Every variable that would be migrated (the EMA shadow where ``use_ema`` takes it) has its bytes checked against
    the checksum the index stores and its values checked for NaN/inf; optimizer slots are range-checked only.

    Returns:
        a :class:`CheckpointInventory`.

    Raises:
        FileNotFoundError: nothing at ``path``.
        CheckpointReadError (a ``ValueError``): truncated or corrupted checkpoint (one line: file, tensor, problem).
        NonFiniteWeightsError (a ``CheckpointReadError``): NaN/inf values, unless ``allow_nonfinite``.
        NoTacotronBlocksError (a ``ValueError``): no Tacotron-2 block and no Tacotron-1 model in the checkpoint.
        Tacotron1ShapesError (a ``ValueError``): variables under ``model/inference/`` that form no Tacotron-1 model
            of a known layout (one line naming the first problem).
        ValueError: ``use_ema`` with a checkpoint that holds no shadow.
    """
    resolved, reader = open_checkpoint(path)
    shape_map = reader.shapes()
    dtypes = reader.dtypes()
    optimizer, ema, model = [], {}, []
    for name in sorted(shape_map):
        if is_optimizer_variable(name):
            optimizer.append((name, shape_map[name]))
        elif name.endswith(EMA_SUFFIX):
            ema[name[: -len(EMA_SUFFIX)]] = name
        else:
            model.append(name)
    ema, orphan_shadows = _match_shadows(ema, set(model))
    if use_ema and not ema:
        raise ValueError(f"--use-ema: checkpoint {resolved!r} holds no ExponentialMovingAverage shadow "
                                    f"('<variable>{EMA_SUFFIX}')")
    reader.check([ema[n] if use_ema and n in ema else n for n in model], allow_nonfinite)
    prefix = _find_prefix(model)
    if prefix is None:
        return _tacotron1_inventory(resolved, reader, model, shape_map, orphan_shadows, optimizer, ema, use_ema,
                                    dtypes)
    blocks, claimed = [], set()
    for kind in BLOCK_KINDS:
        scope = prefix + kind.path
        members = {n[len(scope) + 1:]: n for n in model if n.startswith(scope + "/")}
        if not members:
            continue
        claimed.update(members.values())
        shapes = {rel: shape_map[n] for rel, n in members.items()}
        blocks.append(_analyse_block(kind, scope, shapes, members, ema, use_ema))
    found = _find_model(prefix, model, shape_map, ema, use_ema) if prefix else None
    if found is not None and found.complete:
        claimed.update(found.variables.values())
        claimed.update(n for n in model if n.startswith(prefix))
    unmigrated = [(n, shape_map[n]) for n in model if n not in claimed]
    unmigrated += [(n, shape_map[n]) for n in orphan_shadows]
    return CheckpointInventory(resolved, prefix, blocks, unmigrated, optimizer, ema, use_ema, dtypes, found, reader)
