"""Tacotron-2 synthesis in LiteRT: a numpy host loop over the ``ai_edge_litert`` interpreter.

Runs the three builtin-ops-only models ``tf_layers.Tacotron2.export_litert`` writes (``encoder.tflite``,
``decoder_step.tflite``, ``postnet.tflite``, see ``tf_layers/tacotron2_litert.py``) with the original decoder loop and
stop rule. Imports neither TensorFlow nor torch; ``ai_edge_litert`` is imported when a :class:`LiteRTTacotron2` is
made (``pip install ai-edge-litert``).
"""
from __future__ import annotations

import json
import os

import numpy as np

from .stop_rule import batch_fired

__all__ = ["LiteRTTacotron2"]

FORMAT = "speechblocks-litert-tacotron2/1"
_MODELS = ("encoder", "decoder_step", "postnet")


class _Model:
    """One interpreter driven through its signature's tensors: resized and re-allocated only when an input shape
    changes (every decoder step of an utterance reuses the allocation)."""

    def __init__(self, interpreter_cls, path: str, num_threads: int | None):
        self.interpreter = interpreter_cls(model_path=path, num_threads=num_threads)
        runner = self.interpreter.get_signature_runner()
        self.inputs = {k: d["index"] for k, d in runner.get_input_details().items()}
        self.outputs = {k: d["index"] for k, d in runner.get_output_details().items()}
        self.dtypes = {k: d["dtype"] for k, d in runner.get_input_details().items()}
        del runner  # holds views of the interpreter's buffers, which allocate_tensors refuses to invalidate
        self.shapes: dict[str, tuple] = {}

    def __call__(self, **inputs) -> dict[str, np.ndarray]:
        it = self.interpreter
        arrays = {k: np.ascontiguousarray(v, dtype=self.dtypes[k]) for k, v in inputs.items()}
        shapes = {k: a.shape for k, a in arrays.items()}
        if shapes != self.shapes:
            for k, shape in shapes.items():
                it.resize_tensor_input(self.inputs[k], shape, strict=False)
            it.allocate_tensors()
            self.shapes = shapes
        for k, a in arrays.items():
            it.set_tensor(self.inputs[k], a)
        it.invoke()
        return {k: it.get_tensor(i) for k, i in self.outputs.items()}


class LiteRTTacotron2:
    """A Tacotron-2 exported by ``tf_layers.Tacotron2.export_litert``, run in the LiteRT interpreter.

    :meth:`synthesize` is ``Tacotron2.synthesize`` (free running) as a host loop: the encoder model once, the
    decoder-step model per step (state in, state out), the stop rule of the original (``TacoTestHelper``: stop after
    the step at which, for some frame (``stop_at_any``) or for every frame, every batch entry's stop probability
    rounds to 1 -- half to even, as ``tf.round`` -- or after ``max_iters`` steps), then the postnet model.

    The prenet dropout stays on when the model has one (``tacotron_dropout_rate > 0``, as in the original): its
    keep-masks are inputs of the step model, drawn here with numpy (``seed``) or given (``prenet_masks``: then the
    result equals ``Tacotron2`` called with ``noise_masks={"prenet": prenet_masks}``). A model exported with
    ``tacotron_dropout_rate=0`` is deterministic and equals ``Tacotron2.synthesize`` (within float rounding).

    Args:
        directory: the directory ``export_litert`` wrote.
        num_threads: interpreter threads (None: LiteRT's default).

    Example::

        model = LiteRTTacotron2("tts_litert")
        out = model.synthesize(ids, lengths, speaker_embeddings, max_iters=500)
        out["mel_outputs"].shape  # (batch, steps * r, num_mels)
    """

    def __init__(self, directory, num_threads: int | None = None):
        directory = os.fspath(directory)
        path = os.path.join(directory, "manifest.json")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"LiteRTTacotron2: no manifest.json in {directory!r} (write the directory with "
                                    "tf_layers.Tacotron2.export_litert).")
        with open(path) as f:
            self.manifest = json.load(f)
        if self.manifest.get("format") != FORMAT:
            raise ValueError(f"LiteRTTacotron2: {path!r} is not a {FORMAT} manifest; got format "
                             f"{self.manifest.get('format')!r}.")
        from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415 -- optional dependency, loaded on use

        self._models = {name: _Model(Interpreter, os.path.join(directory, f"{name}.tflite"), num_threads)
                        for name in _MODELS}

    # -- input checks -----------------------------------------------------------------------------------------------
    def _check(self, ids, lengths, speaker_embeddings, max_iters):
        m = self.manifest
        block = "LiteRTTacotron2.synthesize"
        ids = np.asarray(ids)
        if ids.ndim != 2 or ids.shape[1] < 1 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"{block}: argument `ids` must be integer symbol ids of shape (batch, T_in) with T_in >= "
                             f"1; got {ids.dtype} {ids.shape}.")
        if ids.size and (ids.min() < 0 or ids.max() >= m["n_symbols"]):
            raise ValueError(f"{block}: argument `ids` holds ids outside [0, n_symbols={m['n_symbols']}).")
        b, t = ids.shape
        lengths = np.full((b,), t, np.int32) if lengths is None else np.asarray(lengths)
        if lengths.shape != (b,) or not np.issubdtype(lengths.dtype, np.integer) or (
                b and (lengths.min() < 1 or lengths.max() > t)):
            raise ValueError(f"{block}: argument `lengths` must be integers in [1, T_in={t}] of shape (batch={b},); "
                             f"got {lengths.dtype} {lengths.shape}.")
        e = m["speaker_embedding_size"]
        if e:
            spk = None if speaker_embeddings is None else np.asarray(speaker_embeddings, np.float32)
            if spk is None or spk.shape != (b, e):
                raise ValueError(f"{block}: argument `speaker_embeddings` (batch={b}, {e}) is required; got "
                                 f"{None if spk is None else spk.shape}.")
        elif speaker_embeddings is not None:
            raise ValueError(f"{block}: argument `speaker_embeddings` given, but the model has no speaker embedding.")
        else:
            spk = None
        limit = m["max_iters"] if max_iters is None else max_iters
        if isinstance(limit, bool) or int(limit) != limit or int(limit) < 1:
            raise ValueError(f"{block}: argument `max_iters` must be an integer >= 1; got {max_iters!r}.")
        return ids.astype(np.int32), lengths.astype(np.int32), spk, int(limit)

    def _prenet_masks(self, prenet_masks, batch, limit):
        m = self.manifest
        sizes, rate = m["prenet_layers"], m["prenet_drop_rate"]
        if prenet_masks is None:
            return None
        if rate == 0:
            raise ValueError("LiteRTTacotron2.synthesize: argument `prenet_masks` given, but the model has no prenet "
                             "dropout (tacotron_dropout_rate=0).")
        if not isinstance(prenet_masks, (list, tuple)) or len(prenet_masks) != len(sizes):
            raise ValueError(f"LiteRTTacotron2.synthesize: argument `prenet_masks` must be a list of {len(sizes)} "
                             f"keep-masks (batch, steps >= max_iters, prenet_layers[i]) for prenet_layers={sizes}.")
        out = []
        for i, (mask, size) in enumerate(zip(prenet_masks, sizes)):
            mask = np.asarray(mask, np.float32)
            if mask.ndim != 3 or mask.shape[0] != batch or mask.shape[1] < limit or mask.shape[2] != size:
                raise ValueError(f"LiteRTTacotron2.synthesize: argument `prenet_masks[{i}]` must have shape "
                                 f"(batch={batch}, steps >= max_iters={limit}, {size}); got {mask.shape}.")
            out.append(mask)
        return out

    # -- synthesis --------------------------------------------------------------------------------------------------
    def synthesize(self, ids, lengths=None, speaker_embeddings=None, max_iters: int | None = None, *,
                   prenet_masks=None, seed: int | None = None) -> dict[str, np.ndarray]:
        """Free-running synthesis of a padded batch.

        Args:
            ids: int ``(batch, T_in)`` symbol ids (pad id 0 past ``lengths``).
            lengths: int ``(batch,)``; ``None`` is full length.
            speaker_embeddings: float ``(batch, speaker_embedding_size)``, exactly when the model has one.
            max_iters: decoder step cap (default the model's ``max_iters``).
            prenet_masks: optional list per prenet layer of 0/1 keep-masks ``(batch, steps >= max_iters, size)``
                (models with prenet dropout only); default: drawn with ``numpy.random.default_rng(seed)``.
            seed: seed of the drawn keep-masks.

        Returns:
            dict of numpy arrays: ``decoder_outputs`` and ``mel_outputs`` ``(batch, steps * r, num_mels)``,
            ``stop_token_prediction`` ``(batch, steps * r)`` (probabilities), ``alignments`` ``(batch, T_in, steps)``.
        """
        m = self.manifest
        ids, lengths, spk, limit = self._check(ids, lengths, speaker_embeddings, max_iters)
        batch, t_in = ids.shape
        masks = self._prenet_masks(prenet_masks, batch, limit)
        rate, sizes = m["prenet_drop_rate"], m["prenet_layers"]
        rng = np.random.default_rng(seed) if rate > 0 and masks is None else None
        memory = self._models["encoder"](ids=ids, lengths=lengths, **({} if spk is None else
                                                                        {"speaker_embeddings": spk}))
        n_layers, units = m["decoder_layers"], m["decoder_lstm_units"]
        zeros = np.zeros((batch, units), np.float32)
        state = dict(context=np.zeros((batch, m["memory_size"]), np.float32),
                     attention=np.zeros((batch, t_in), np.float32),
                     **{f"cell_{k}": zeros for k in range(n_layers)}, **{f"hidden_{k}": zeros for k in range(n_layers)})
        fixed = dict(values=memory["values"], keys=memory["keys"], lengths=lengths)
        frame = np.zeros((batch, m["num_mels"]), np.float32)
        step_model = self._models["decoder_step"]
        frames, stops, alignments = [], [], []
        for t in range(limit):
            keeps = {}
            if rate > 0:
                for i, size in enumerate(sizes):
                    keeps[f"prenet_keep_{i}"] = (masks[i][:, t] if masks is not None else
                                                 (rng.random((batch, size)) >= rate).astype(np.float32))
            out = step_model(frame=frame, **state, **fixed, **keeps)
            state = {k: out[k] for k in state}
            frames.append(out["frames"])
            stops.append(out["stop"])
            alignments.append(out["alignments"])
            frame = out["frames"][:, -m["num_mels"]:]
            if batch_fired(out["stop"], m["stop_at_any"]):
                break
        post = self._models["postnet"](frames=np.stack(frames, 1))
        return dict(decoder_outputs=post["decoder_outputs"], mel_outputs=post["mel_outputs"],
                    stop_token_prediction=np.stack(stops, 1).reshape(batch, -1),
                    alignments=np.stack(alignments, 2))
