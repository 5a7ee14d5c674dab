"""Fresh-process SavedModel reloader for :mod:`tests.helpers.keras_layer_test` (run as a script, never imported).

One such process per test worker imports TensorFlow once, then serves requests, one JSON line each on stdin:
``{"dir": saved_model_dir, "endpoint": "serve", "inputs": in.npz, "outputs": out.npz, "calls": n, "kwargs": bool}``.
It loads the SavedModel with ``tf.saved_model.load`` (no Keras model object, no speechblocks code: ``tf_layers`` is
never imported here, and that is checked), calls the endpoint on each input set ``c`` (arrays ``c{c}_{i}``: a list
as the endpoint's one argument, or keywords ``c{c}_{name}`` with ``"kwargs"``), writes the flattened outputs
(``c{c}_{j}``, ``tf.nest.flatten`` order) to ``out.npz`` and answers one line ``{"ok": true}`` or
``{"ok": false, "error": traceback}`` prefixed by ``RELOAD:``. Stdin closed (the test worker ended, however it
ended): the scratch directory given as the one argument (``speechblocks_export_*``) is removed, then exit.
"""
import json
import os
import shutil
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.pop("TF_USE_LEGACY_KERAS", None)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

PREFIX = "RELOAD:"


def _serve(request):
    loaded = tf.saved_model.load(request["dir"])
    endpoint = getattr(loaded, request.get("endpoint", "serve"))
    with np.load(request["inputs"]) as data:
        arrays = {k: data[k] for k in data.files}
    out = {}
    for c in range(int(request["calls"])):
        mine = {k[len(f"c{c}_"):]: v for k, v in arrays.items() if k.startswith(f"c{c}_")}
        if request.get("kwargs"):
            result = endpoint(**{k: tf.constant(v) for k, v in mine.items()})
        else:
            result = endpoint([tf.constant(mine[str(i)]) for i in range(len(mine))])
        for j, t in enumerate(tf.nest.flatten(result)):
            out[f"c{c}_{j}"] = np.asarray(t)
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("tf_layers", "speechblocks", "torch_layers"))
    if leaked:
        raise RuntimeError(f"the reloader imported speechblocks code: {leaked}")
    np.savez(request["outputs"], **out)


def main():
    print(PREFIX + json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            _serve(json.loads(line))
            reply = {"ok": True}
        except Exception:  # noqa: BLE001 -- reported to the test, which fails with it
            reply = {"ok": False, "error": traceback.format_exc()}
        print(PREFIX + json.dumps(reply), flush=True)
    scratch = sys.argv[1] if len(sys.argv) > 1 else ""
    if os.path.basename(os.path.normpath(scratch)).startswith("speechblocks_export_"):
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
