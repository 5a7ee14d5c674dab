"""A TF1 graph as one side of :func:`speechblocks.parity.compare`, run by the project's legacy TF1 reference.

The graph runs in the reference's subprocess (``parity_tests/reference.py`` / ``parity_tests/legacy/runner.py``,
``TF_USE_LEGACY_KERAS=1``: ``tf.compat.v1`` layers and cells are back there, while this process keeps Keras 3),
one long-lived server per process, results memoised by their inputs. Two kinds of graph:

* a project builder spec (:class:`parity_tests.reference.LegacySpec`): the TF1 graph of one of the project's
  blocks, its variables seeded random values, saved as a real checkpoint (:attr:`TF1Graph.checkpoint`,
  :attr:`TF1Graph.block_scope`: load a Keras or torch block from it);
* your own checkpoint with its ``.meta`` graph: imported with ``tf.compat.v1.train.import_meta_graph``, restored
  with its ``Saver`` and run on the feeds, e.g. ``TF1Graph("model.ckpt-1000", feeds={"x": "inputs:0"},
  fetches={"y": "model/dense/BiasAdd:0"})``.
"""
from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any, Optional, Union

import numpy as np

__all__ = ["TF1Graph", "META_GRAPH_BLOCK"]

#: the runner's block name of a ``.meta`` graph run (``parity_tests/legacy/runner.py``)
META_GRAPH_BLOCK = "__meta_graph__"
_TENSOR_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/]*:\d+$")


def _is_spec(source: Any) -> bool:
    return type(source).__name__ == "LegacySpec" and dataclasses.is_dataclass(source)


def _check_names(value: Any, arg: str) -> dict:
    if not isinstance(value, Mapping) or not value:
        raise TypeError(f"TF1Graph: argument `{arg}` must be a non-empty dict {{name: 'tensor:0'}}; got "
                        f"{type(value).__name__}.")
    for name, tensor in value.items():
        if not isinstance(name, str) or not isinstance(tensor, str) or not _TENSOR_NAME.match(tensor):
            raise ValueError(f"TF1Graph: argument `{arg}` maps {name!r} to {tensor!r}; expected a graph tensor name "
                             f"such as 'scope/op:0'.")
    return dict(value)


class TF1Graph:
    """A TF1 graph, callable on a dict of numpy arrays, returning ``{output name: array}``.

    Args:
        source: a :class:`parity_tests.reference.LegacySpec` (a project builder's graph; its ``inputs`` are
            replaced by the inputs of each call, its seed fixes the variables), or the prefix of your own TF1
            checkpoint (``model.ckpt-1000``; its ``.meta`` graph and ``.index`` must exist).
        feeds: with a checkpoint, ``{input name: graph tensor name}`` -- the input names are the keys of the
            inputs given to :func:`~speechblocks.parity.compare`.
        fetches: with a checkpoint, ``{output name: graph tensor name}``.
        name: the rows' block label (default the builder's block, or the checkpoint's file name).
        timeout: seconds the reference may take per call.

    Raises:
        FileNotFoundError: no ``.meta`` or ``.index`` file next to the checkpoint prefix.
        TypeError, ValueError: ``feeds``/``fetches`` missing or not tensor names; given with a spec.

    Example:
    >>> graph = TF1Graph("logs/model.ckpt-5000", feeds={"x": "inputs:0"}, fetches={"y": "net/out/BiasAdd:0"})
    >>> graph({"x": np.zeros((1, 4, 3), np.float32)})["y"].shape  # doctest: +SKIP
    """

    def __init__(self, source: Union[str, os.PathLike, Any], feeds: Optional[Mapping[str, str]] = None,
                 fetches: Optional[Mapping[str, str]] = None, *, name: Optional[str] = None,
                 timeout: float = 1200.0):
        self.timeout = float(timeout)
        if _is_spec(source):
            if feeds is not None or fetches is not None:
                raise ValueError("TF1Graph: `feeds` and `fetches` belong to a checkpoint's .meta graph; a LegacySpec "
                                 "feeds its builder's placeholders (the input names) and returns every output.")
            self.spec = source
            self.prefix = None
            self.feeds = self.fetches = None
            self.name = name or source.block
            return
        if not isinstance(source, (str, os.PathLike)):
            raise TypeError(f"TF1Graph: argument `source` must be a LegacySpec or a checkpoint prefix; got "
                            f"{type(source).__name__}.")
        prefix = os.path.abspath(os.fspath(source))
        for ext in (".meta", ".index"):
            if not os.path.isfile(prefix + ext):
                raise FileNotFoundError(f"TF1Graph: no {prefix + ext} (argument `source` must be a checkpoint prefix "
                                        f"saved with its .meta graph, e.g. by tf.compat.v1.train.Saver)")
        self.spec = None
        self.prefix = prefix
        self.feeds = _check_names(feeds, "feeds")
        self.fetches = _check_names(fetches, "fetches")
        self.name = name or os.path.basename(prefix)

    def __repr__(self) -> str:
        what = f"spec {self.spec.block!r}" if self.spec is not None else repr(self.prefix)
        return f"TF1Graph({what})"

    # -- running -----------------------------------------------------------------------------------------------------
    def _spec_for(self, inputs: Mapping[str, np.ndarray]):
        from parity_tests.reference import LegacySpec

        if self.spec is not None:
            return dataclasses.replace(self.spec, inputs=dict(inputs))
        unknown = sorted(set(inputs) - set(self.feeds))
        if unknown:
            raise ValueError(f"TF1Graph: inputs {unknown} have no entry in `feeds` (known: {sorted(self.feeds)}).")
        stat = os.stat(self.prefix + ".index")
        return LegacySpec(META_GRAPH_BLOCK, {"checkpoint": self.prefix, "feeds": self.feeds, "fetches": self.fetches,
                                             "stamp": [stat.st_mtime_ns, stat.st_size]},
                          dict(inputs), scope="", dynamic_shapes=False)

    def _run(self, inputs: Mapping[str, np.ndarray]):
        from parity_tests.reference import run_legacy

        return run_legacy([self._spec_for(inputs)], timeout=self.timeout)[0]

    def __call__(self, inputs: Union[Mapping[str, Any], np.ndarray, None] = None, **kwargs) -> dict:
        """Runs the graph on ``inputs`` (a dict, keywords, or one array for a graph of one input).

        Returns:
            ``{output name: array}`` (a builder's drawn keep-masks ``mask/...`` left out).
        """
        if isinstance(inputs, np.ndarray):
            names = list(self.feeds) if self.feeds else ["inputs"]
            if len(names) != 1:
                raise ValueError(f"TF1Graph: one array given, but the graph has {len(names)} feeds {names}: pass a "
                                 f"dict.")
            inputs = {names[0]: inputs}
        given = dict(inputs or {}, **kwargs)
        arrays = {k: np.asarray(v) for k, v in given.items()}
        outputs = self._run(arrays).outputs
        return {k: v for k, v in outputs.items() if not k.startswith("mask/")}

    @property
    def checkpoint(self) -> str:
        """The TF1 checkpoint prefix the graph's variables are in (a spec runs once on its own inputs for it)."""
        if self.prefix is not None:
            return self.prefix
        return self._run(self.spec.inputs).checkpoint

    @property
    def block_scope(self) -> str:
        """The block's full variable scope in :attr:`checkpoint` (``""`` for your own checkpoint)."""
        if self.prefix is not None:
            return ""
        return self._run(self.spec.inputs).block_scope
