"""A small generic driver of the property tests: a block describes its inputs and outputs once
(:class:`BlockProperties`), :func:`property_tests` turns it into the pytest functions of every property for both
frameworks. Used by ``tests/test_properties_*.py``.

Properties (``property_tests`` returns only those a block declares):

- ``reach`` (blocks that read padding): the frame ``reach - 1`` past a length changes the valid outputs, the
  frame ``reach`` past it does not -- the documented reach is exact;
- ``padding``: replacing the padding past each length with arbitrary finite values, and appending more padded
  frames, changes no valid output (blocks that read padding declare ``reach``: the frames right after a length
  that they read; only padding beyond them is replaced, and nothing is appended);
- ``permutation``: permuting the batch permutes the outputs (scalar losses: unchanged);
- ``rows``: each row run alone, cut to its own length, gives the batch's valid outputs of that row;
- ``float64``: float64 weights and inputs match float32 within float32 noise;
- ``mixed``: Keras under ``mixed_float16`` and torch under CPU autocast stay finite;
- ``twin``: Keras and torch agree for drawn shapes and drawn weights.

A case is a dict of numpy arrays, batch on axis 0 (lengths too). ``padded`` maps an input to the length input
that bounds its axis 1; ``outputs`` maps an output to the length input bounding its axis 1, or ``ROW`` (per row,
no padded axis) or ``SCALAR``.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from .strategies import normal, padding_values, paddings, round_up, sequence_batches, weight_seeds

ROW = "row"
SCALAR = "scalar"
FRAMEWORKS = ("keras", "torch")


class BlockProperties:
    """What the driver needs to know about one block; subclasses fill in the class attributes and methods."""

    name = "block"
    padded: dict[str, str] = {}
    outputs: dict[str, str] = {}
    #: frames right after each length that the block reads (0: padding-invariant)
    reach = 0
    #: time axes are ``max(lengths)`` rounded up to this multiple (the masked losses' ``r``)
    time_multiple = 1
    #: the properties this block satisfies (see the module docstring)
    properties = ("padding", "permutation", "rows", "float64", "mixed", "twin")
    tol = 1e-5  # float32 block parity (docs/ARCHITECTURE.md, tolerances)
    float64_tol = 1e-4  # float32 vs float64 of the same weights: float32 rounding through the whole block
    #: fraction of the profile's ``max_examples`` (expensive blocks)
    examples_scale = 1.0
    #: {property: [keyword arguments of the property's test, ...]}: failing examples found once, kept as ``@example``
    examples: dict[str, list] = {}

    def __init__(self):
        self._instances = {}

    # -- to implement -------------------------------------------------------------------------------------
    def cases(self) -> st.SearchStrategy:
        """A strategy of cases (dicts of numpy arrays)."""
        raise NotImplementedError

    def make(self, framework: str, precision: str):
        """A new instance: precision ``"float32"``, ``"float64"`` or ``"mixed"``."""
        raise NotImplementedError

    def weights(self, instance, seed: int):
        """Random weights (in the exchange format of :meth:`load`) for ``instance``, from ``seed``."""
        raise NotImplementedError

    def load(self, instance, framework: str, weights) -> None:
        raise NotImplementedError

    #: inputs passed positionally, in this order
    arguments: tuple[str, ...] = ()

    def call(self, instance, framework: str, precision: str, case: dict) -> dict:
        """Runs the instance on ``arguments`` of the case (eager Keras with ``training=False``, torch without
        gradients; float64 casts float inputs); returns ``{output name: numpy array}``."""
        args = [case[name] for name in self.arguments]
        if framework == "keras":
            args = [a.astype(np.float64) if precision == "float64" and a.dtype.kind == "f" else a for a in args]
            y = instance(*args, training=False)
            return self.named_outputs(y)
        import torch

        dtype = torch.float64 if precision == "float64" else torch.float32
        tensors = [torch.from_numpy(np.ascontiguousarray(a)).to(dtype) if a.dtype.kind == "f"
                   else torch.from_numpy(np.ascontiguousarray(a)).long() for a in args]
        with torch.no_grad(), torch.autocast("cpu", enabled=precision == "mixed"):
            y = instance(*tensors)
        return self.named_outputs(y)

    def named_outputs(self, y) -> dict:
        """``{output name: numpy}`` of the block's return value (one tensor: the single output)."""
        (name,) = self.outputs
        return {name: to_numpy(y)}


    def combine_rows(self, name: str, values: list, case: dict):
        """A scalar output of the whole batch from its value on each row alone (needed by ``rows``)."""
        raise NotImplementedError

    def reach_case(self, length: int, time: int, seed: int) -> dict:
        """One row of ``length`` valid frames in ``time`` (blocks with a ``reach``)."""
        raise NotImplementedError

    def fill(self, name: str, rng: np.random.Generator, shape, dtype) -> np.ndarray:
        """Arbitrary finite padding values for input ``name``."""
        return padding_values(rng, shape, dtype)

    # -- driver ---------------------------------------------------------------------------------------------
    def run(self, framework: str, case: dict, weight_seed: int, precision: str = "float32") -> dict:
        """Outputs of the block built once per ``(framework, precision)``, reloaded when the weight seed changes."""
        key = (framework, precision)
        if key not in self._instances:
            self._instances[key] = [self.make(framework, precision), None]
        entry = self._instances[key]
        if entry[1] != weight_seed:
            reference = self._reference_instance(framework)
            self.load(entry[0], framework, self.weights(reference, weight_seed))
            entry[1] = weight_seed
        return self.call(entry[0], framework, precision, case)

    #: the framework whose float32 instance fixes the weight layout (drawn weights: the same for every instance)
    reference_framework = "keras"

    def _reference_instance(self, framework):
        key = (self.reference_framework, "float32")
        if key not in self._instances:
            self._instances[key] = [self.make(self.reference_framework, "float32"), None]
        return self._instances[key][0]

    def pad(self, case: dict, extra: int, seed: int) -> dict:
        """The case with every padded input's frames past ``length + reach`` replaced by arbitrary values and
        ``extra`` more such frames appended (none when the block reads padding or fixes its time axis)."""
        rng = np.random.default_rng(seed)
        if self.reach or self.time_multiple > 1:
            extra = 0
        out = dict(case)
        for name, length_name in self.padded.items():
            x = case[name]
            if extra:
                tail = np.zeros((x.shape[0], extra) + x.shape[2:], x.dtype)
                x = np.concatenate([x, tail], axis=1)
            x = x.copy()
            for b, n in enumerate(case[length_name]):
                start = int(n) + self.reach
                if start < x.shape[1]:
                    x[b, start:] = self.fill(name, rng, x[b, start:].shape, x.dtype)
            out[name] = x
        return out

    def permute(self, case: dict, perm: np.ndarray) -> dict:
        return {k: v[perm] for k, v in case.items()}

    def row(self, case: dict, i: int) -> dict:
        """Row ``i`` alone, its padded axes cut to its own length (rounded up to ``time_multiple``)."""
        out = {k: v[i:i + 1] for k, v in case.items()}
        for name, length_name in self.padded.items():
            n = round_up(int(case[length_name][i]), self.time_multiple)
            out[name] = out[name][:, :max(n, 1)]
        return out

    def valid(self, outputs: dict, case: dict, rows=None) -> dict:
        """``{(output, row): valid part}``; scalars under ``(output, None)``."""
        out = {}
        for name, kind in self.outputs.items():
            y = np.asarray(outputs[name])
            if kind == SCALAR:
                out[(name, None)] = y
                continue
            for b in range(y.shape[0]) if rows is None else rows:
                out[(name, b)] = y[b] if kind == ROW else y[b, :int(case[kind][b])]
        return out


def assert_valid_close(label: str, got: dict, want: dict, tol: float, what: str) -> None:
    """Every entry of ``got`` within ``tol`` (relative to ``max(1, max|want|)``) of ``want``'s; ``label`` names the
    block in the message."""
    assert got.keys() == want.keys(), what
    for key in want:
        a, b = np.asarray(got[key], np.float64), np.asarray(want[key], np.float64)
        assert a.shape == b.shape, f"{label} {what}: {key} shape {a.shape} != {b.shape}"
        err = float(np.max(np.abs(a - b), initial=0.0))
        scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
        assert err <= tol * scale, f"{label} {what}: {key} max |diff| {err:.3e} > {tol * scale:.1e}"


def _with_examples(test, block: BlockProperties, prop: str):
    for args in block.examples.get(prop, []):
        test = example(**args)(test)
    if block.examples_scale != 1.0:  # of the active profile's count (the thorough profile scales alike)
        test = settings(max_examples=max(1, math.ceil(settings().max_examples * block.examples_scale)))(test)
    return test


def property_tests(block: BlockProperties, frameworks=FRAMEWORKS) -> dict:
    """``{test name: test function}`` of the block's properties; a test module does ``globals().update(...)``."""
    tests = {}
    cases = block.cases()

    def add(prop, name, test):
        tests[name] = _with_examples(test, block, prop)

    for fw in frameworks:
        _framework_tests(block, fw, cases, add)

    if "twin" in block.properties and set(FRAMEWORKS) <= set(frameworks):
        @given(case=cases, seed=weight_seeds)
        def test_twin(case, seed):
            got = block.valid(block.run("torch", case, seed), case)
            want = block.valid(block.run("keras", case, seed), case)
            assert_valid_close(block.name, got, want, block.tol, "Keras<->torch")
        add("twin", "test_keras_and_torch_agree_for_drawn_shapes_and_weights", test_twin)
    return tests


def _framework_tests(block: BlockProperties, fw: str, cases, add) -> None:
    """The one-framework properties of ``block`` for framework ``fw``, passed to ``add(prop, name, test)``."""
    if "padding" in block.properties:
        @given(case=cases, padding=paddings(), seed=weight_seeds)
        def test_padding(case, padding, seed):
            extra, pad_seed = padding
            padded = block.pad(case, extra, pad_seed)
            want = block.valid(block.run(fw, case, seed), case)
            got = block.valid(block.run(fw, padded, seed), case)
            assert_valid_close(block.name, got, want, block.tol, f"{fw} padding invariance")
        add("padding", f"test_padding_past_lengths_changes_no_valid_output_{fw}", test_padding)

    if "permutation" in block.properties:
        @given(case=cases, perm_seed=st.integers(0, 2**16), seed=weight_seeds)
        def test_permutation(case, perm_seed, seed):
            batch = len(next(iter(case.values())))
            perm = np.random.default_rng(perm_seed).permutation(batch)
            base = block.valid(block.run(fw, case, seed), case)
            permuted = block.permute(case, perm)
            got = block.valid(block.run(fw, permuted, seed), permuted)
            inverse = np.argsort(perm)  # row b of the permuted batch is row perm[b]: keys renumbered
            want = {(name, None if b is None else int(inverse[b])): v for (name, b), v in base.items()}
            assert_valid_close(block.name, got, want, block.tol, f"{fw} batch permutation")
        add("permutation", f"test_batch_permutation_permutes_outputs_{fw}", test_permutation)

    if "rows" in block.properties:
        @given(case=cases, seed=weight_seeds)
        def test_rows(case, seed):
            batch = len(next(iter(case.values())))
            whole = block.valid(block.run(fw, case, seed), case)
            alone = [block.valid(block.run(fw, block.row(case, i), seed), block.row(case, i)) for i in range(batch)]
            for i in range(batch):
                got = {(name, i): v for (name, b), v in alone[i].items() if b is not None}
                want = {k: v for k, v in whole.items() if k[1] == i}
                assert_valid_close(block.name, got, want, block.tol, f"{fw} row {i} run alone")
            for name, kind in block.outputs.items():  # a scalar (loss) of the batch from its rows' values
                if kind == SCALAR:
                    got = block.combine_rows(name, [a[(name, None)] for a in alone], case)
                    assert_valid_close(block.name, {name: got}, {name: whole[(name, None)]}, block.tol,
                                       f"{fw} scalar of the batch from its rows")
        add("rows", f"test_batch_equals_rows_run_one_by_one_{fw}", test_rows)

    if "float64" in block.properties:
        @given(case=cases, seed=weight_seeds)
        def test_float64(case, seed):
            got = block.valid(block.run(fw, case, seed, "float64"), case)
            want = block.valid(block.run(fw, case, seed), case)
            for key, v in got.items():
                assert np.asarray(v).dtype == np.float64, f"{block.name} {fw} float64: {key} is {v.dtype}"
            assert_valid_close(block.name, got, want, block.float64_tol, f"{fw} float64 vs float32")
        add("float64", f"test_float64_matches_float32_{fw}", test_float64)

    if block.reach:
        @given(length=st.integers(1, 4), seed=weight_seeds, value_seed=st.integers(0, 2**16))
        def test_reach(length, seed, value_seed):
            """The reach is exact: the farthest frame it covers changes the last valid output, the next does not."""
            case = block.reach_case(length, length + block.reach + 2, value_seed)
            base = block.valid(block.run(fw, case, seed), case)
            for offset, changes in ((block.reach - 1, True), (block.reach, False)):
                diff = 0.0
                for step in (10.0, -10.0):  # both signs: a relu dead for one direction passes the other
                    moved = {k: v.copy() for k, v in case.items()}
                    for name in block.padded:
                        moved[name][:, length + offset] += step
                    got = block.valid(block.run(fw, moved, seed), case)
                    diff = max([diff] + [float(np.max(np.abs(np.asarray(got[k], np.float64) - base[k]), initial=0.0))
                                         for k in base])
                assert (diff > 1e-4) == changes, (
                    f"{block.name} {fw}: frame length+{offset} changed the valid outputs by {diff:.3e}; "
                    f"documented reach {block.reach}")
        add("reach", f"test_padding_is_read_exactly_within_the_documented_reach_{fw}", test_reach)

    if "mixed" in block.properties:
        @given(case=cases, seed=weight_seeds)
        def test_mixed(case, seed):
            for key, v in block.valid(block.run(fw, case, seed, "mixed"), case).items():
                assert np.all(np.isfinite(np.asarray(v, np.float64))), f"{block.name} {fw} mixed: {key} not finite"
        label = "mixed_float16" if fw == "keras" else "autocast"
        add("mixed", f"test_{label}_stays_finite_{fw}", test_mixed)


class TF1Block(BlockProperties):
    """A Tacotron-2 block: Keras layer and torch twin of the same keywords, weights exchanged in TF1 layout
    (``tf1_weights`` / ``load_tf1_weights``). ``input_size`` is the input channels (the torch twin's first
    argument; the Keras layer is built with it)."""

    keras_cls = torch_cls = None
    kwargs: dict = {}
    input_size = 1

    def make(self, framework, precision):
        if framework == "keras":
            layer = self.keras_cls(**self.kwargs, dtype="mixed_float16" if precision == "mixed" else precision)
            layer.build((None, None, self.input_size))
            return layer
        module = self.torch_cls(self.input_size, **self.kwargs).eval()
        return module.double() if precision == "float64" else module

    def weights(self, instance, seed):
        rng = np.random.default_rng(seed)
        out = {}
        for k, v in instance.tf1_weights().items():
            w = (0.5 * rng.standard_normal(v.shape)).astype(np.float32)
            out[k] = np.abs(w) + 0.5 if k.endswith("moving_variance") else w
        return out

    def load(self, instance, framework, weights):
        instance.load_tf1_weights(weights)



class SequenceBlock(TF1Block):
    """A Tacotron-2 block over ``inputs (batch, time, input_size)`` with ``input_lengths`` (passed to the block
    unless ``arguments`` leaves them out: the conv stacks take none, their lengths only say which frames are
    padding). With a ``reach`` (the block reads padding) a row run alone keeps the batch's padded frames."""

    arguments = ("inputs", "input_lengths")
    padded = {"inputs": "input_lengths"}
    outputs = {"outputs": "input_lengths"}
    max_time = 7

    def cases(self):
        return sequence_batches(self.input_size, max_batch=4, max_time=self.max_time)

    def reach_case(self, length, time, seed):
        x = normal(np.random.default_rng(seed), (1, time, self.input_size))
        return {"inputs": x, "input_lengths": np.array([length], np.int32)}

    def row(self, case, i):
        if not self.reach:
            return super().row(case, i)
        return {k: v[i:i + 1] for k, v in case.items()}  # the frames it reads past the length stay

def to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch (bfloat16 under autocast has no numpy dtype)
        x = x.detach()
        return (x.float() if x.dtype.is_floating_point and x.element_size() == 2 else x).cpu().numpy()
    return np.asarray(x)


class TorchStateBlock(BlockProperties):
    """One of the four PyTorch modules (``TAC``, ``GaussianEmbedding``, ...) and its Keras twin: same keywords,
    weights exchanged as the torch state dict (``load_torch_state_dict`` on the Keras side)."""

    keras_cls = torch_cls = None
    kwargs: dict = {}
    reference_framework = "torch"

    def make(self, framework, precision):
        if framework == "keras":
            return self.keras_cls(**self.kwargs, dtype="mixed_float16" if precision == "mixed" else precision)
        module = self.torch_cls(**self.kwargs).eval()
        return module.double() if precision == "float64" else module

    def weights(self, instance, seed):
        rng = np.random.default_rng(seed)
        return {k: (0.5 * rng.standard_normal(tuple(v.shape))).astype(np.float32)
                for k, v in instance.state_dict().items()}

    def load(self, instance, framework, weights):
        if framework == "keras":
            instance.load_torch_state_dict(weights)
            return
        import torch

        dtype = next(instance.parameters()).dtype
        instance.load_state_dict({k: torch.from_numpy(v).to(dtype) for k, v in weights.items()})
