"""The device check of issue #38, torch only: our Tacotron-2 on a GPU against itself on the CPU, fp32 against bf16
training, and speed beside torchaudio's ``Tacotron2`` on the same device in the same run.

Sections (each result in the ``--out`` JSON):

1. ``equality``: the model on ``--device`` against the same weights on the CPU, float32 with TF32 off, the pre-net
   dropout off: teacher forced (GTA, ``mel_targets``) and free running (``--equal-steps`` steps, the stop held off);
   max ``|Δ|`` of the mel outputs and alignments, target <= 1e-4.
2. ``curves``: ``--curve-steps`` training steps in fp32 and in bf16 (``Tacotron2Trainer.configured``: autocast, float32
   master weights and Adam) from the same initial weights on the same batches; both loss curves.
3. ``training``: steps/s of one training step at RTVC sizes, batch ``--batch``, in fp32 and bf16, beside torchaudio's
   ``Tacotron2.forward`` + the same loss terms (MSE of mel and postnet mel, the gate's BCE) + ``backward`` + Adam at the
   same batch, text and mel lengths (torchaudio: n_symbol 66, n_mels 80, its defaults otherwise; r = 1 where RTVC
   has r = 2). Target: our step time <= 1.0x torchaudio's.
4. ``synthesis``: seconds to synthesize ``--synth-frames`` mel frames (the stop held off on both sides) at batch 1 and
   batch ``--batch``, ours (``synthesize_batch``) and torchaudio's ``infer``. Target at batch 1: <= 1.0x.

The model: ``--model MIGRATED.pt`` (a ``speechblocks migrate --to torch`` file, e.g. made on a machine with
TensorFlow), else the RTVC preset from TF1's initializers (seed 0). ``--tiny`` shrinks every size for a CPU smoke
run (``make test`` runs it: ``tests/test_gpu_check.py``). Without torchaudio the comparison is skipped with a note.
At full sizes on one GPU it is sized to finish well inside 8 minutes.

``python -m bench.gpu_check --device cuda --out gpu_check.json [--model tacotron2.pt]``
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings

import numpy as np

#: the sizes of ``--tiny`` (a CPU smoke run of every section)
TINY = dict(embedding_dim=16, enc_conv_channels=16, enc_conv_num_layers=1, encoder_lstm_units=8, attention_dim=8,
            attention_filters=4, attention_kernel=3, prenet_layers=[16, 16], decoder_layers=1, decoder_lstm_units=32,
            postnet_channels=16, postnet_num_layers=2, speaker_embedding_size=8, num_mels=80, outputs_per_step=2)


def _sync(device) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _timed(fn, device, repeats: int, warmup: int = 1) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after ``warmup``."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _hparams(args):
    from speechblocks.tacotron2_hparams import resolve_hparams, tacotron2_hparams

    full = dict(tacotron2_hparams("rtvc"), tacotron_dropout_rate=0.0, **(TINY if args.tiny else {}))
    return full, resolve_hparams(full)


def _batch(full: dict, batch: int, t_in: int, frames: int, seed: int) -> dict:
    """``prepare_batch``'s dict of ``batch`` utterances, every one ``t_in`` symbols and ``frames`` frames: a
    learnable map (each symbol its own spectrum, held for ``frames / t_in`` frames)."""
    from speechblocks.training import prepare_batch

    rng = np.random.default_rng(seed)
    book = np.random.default_rng(12345).uniform(-4, 0, size=(66, full["num_mels"])).astype(np.float32)
    rows = []
    for _ in range(batch):
        ids = np.append(rng.integers(28, 54, size=t_in - 1), 1).astype(np.int32)
        mel = book[ids[np.minimum(np.arange(frames) * t_in // frames, t_in - 1)]]
        embed = rng.normal(size=full["speaker_embedding_size"]).astype(np.float32)
        rows.append((ids, mel, embed / np.linalg.norm(embed)))
    return prepare_batch(rows, full)


def _model(args, hp, device):
    import torch_layers
    from torch_layers.tacotron2_trainer import Tacotron2Trainer

    if args.model:
        model = torch_layers.Tacotron2.from_migrated(args.model, tacotron_dropout_rate=0.0)
    else:
        model = Tacotron2Trainer.new(hp, seed=0).model
    return model.eval().to(device)


def equality(args, full, hp) -> dict:
    """Section 1."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cpu = _model(args, hp, "cpu")
    dev = _model(args, hp, "cpu").to(args.device)
    dev.load_state_dict(cpu.state_dict())
    for m in (cpu, dev):  # the stop held off: both run every step
        with torch.no_grad():
            m.decoder.stop_projection.dense.bias -= 30.0
    b = _batch(full, 2, args.t_in, args.equal_steps * hp.outputs_per_step, seed=1)
    inputs = {k: torch.from_numpy(np.asarray(b[k])) for k in ("inputs", "input_lengths", "speaker_embeddings",
                                                               "mel_targets")}
    out = {}
    for mode in ("teacher_forced", "free_running"):
        got = []
        for m, device in ((cpu, "cpu"), (dev, args.device)):
            x = {k: v.to(device) for k, v in inputs.items()}
            torch.manual_seed(0)
            r = m.synthesize(x["inputs"].long(), x["input_lengths"].long(), x["speaker_embeddings"],
                             max_iters=args.equal_steps,
                             mel_targets=x["mel_targets"] if mode == "teacher_forced" else None)
            got.append({k: r[k].float().cpu().numpy() for k in ("mel_outputs", "alignments")})
        diff = {k: float(np.abs(got[0][k] - got[1][k]).max()) for k in got[0]}
        out[mode] = dict(diff, steps=int(got[0]["alignments"].shape[-1]), passed=max(diff.values()) <= 1e-4)
    return out


def curves(args, full, hp) -> dict:
    """Section 2."""
    from torch_layers.tacotron2_trainer import Tacotron2Trainer

    out = {}
    batches = [_batch(full, args.curve_batch, args.t_in, args.curve_frames, seed=100 + i) for i in range(8)]
    for precision in ("fp32", "bf16"):
        trainer = Tacotron2Trainer.configured(args.device, precision).new(hp, seed=0)
        t0 = time.perf_counter()
        losses = [trainer.train_step(batches[i % len(batches)], 1e-3, seed=i).losses["loss"]
                  for i in range(args.curve_steps)]
        _sync(args.device)
        out[precision] = {"loss": [round(x, 5) for x in losses], "seconds": time.perf_counter() - t0}
    a, b = np.asarray(out["fp32"]["loss"]), np.asarray(out["bf16"]["loss"])
    tail = max(1, len(a) // 10)
    out["summary"] = {"first": [float(a[0]), float(b[0])], "last_tenth_mean": [float(a[-tail:].mean()),
                                                                               float(b[-tail:].mean())],
                      "max_abs_gap": float(np.abs(a - b).max())}
    return out


def _torchaudio():
    """torchaudio's ``Tacotron2`` class, or ``None`` with the reason. ``SPEECHBLOCKS_TORCHAUDIO_TACOTRON2=FILE``
    loads its ``models/tacotron2.py`` from a file (pure Python; for a torchaudio whose C extension does not load)."""
    path = os.environ.get("SPEECHBLOCKS_TORCHAUDIO_TACOTRON2")
    if path:
        import importlib.util

        spec = importlib.util.spec_from_file_location("_torchaudio_tacotron2", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.Tacotron2, f"torchaudio's tacotron2.py from {path}"
    try:
        import torchaudio
        from torchaudio.models import Tacotron2
    except Exception as e:  # noqa: BLE001 -- absent, or its extension does not load
        return None, f"torchaudio not importable ({type(e).__name__}: {e})"
    return Tacotron2, f"torchaudio {torchaudio.__version__}"


def _torchaudio_model(cls, args, device):
    kw = dict(n_mels=80, n_symbol=66)
    if args.tiny:
        kw.update(symbol_embedding_dim=16, encoder_embedding_dim=16, encoder_n_convolution=1, encoder_kernel_size=3, decoder_rnn_dim=32,
                  attention_rnn_dim=32, attention_hidden_dim=8, attention_location_n_filter=4,
                  attention_location_kernel_size=3, prenet_dim=16, postnet_n_convolution=2, postnet_embedding_dim=16)
    return cls(**kw).to(device)


def training(args, full, hp, ta) -> dict:
    """Section 3."""
    import torch
    import torch.nn.functional as F

    from torch_layers.tacotron2_trainer import Tacotron2Trainer

    b = _batch(full, args.batch, args.t_in, args.frames, seed=7)
    out = {"batch": args.batch, "t_in": args.t_in, "frames": args.frames}
    for precision in ("fp32", "bf16"):
        trainer = Tacotron2Trainer.configured(args.device, precision).new(hp, seed=0)
        step = iter(range(10 ** 6))
        out[f"ours_{precision}_seconds"] = _timed(lambda: trainer.train_step(b, 1e-3, seed=next(step)), args.device,
                                                  args.repeats)
    cls, note = ta
    out["torchaudio"] = note
    if cls is None:
        print(f"gpu_check: {note}: the torchaudio comparison is skipped", flush=True)
        return out
    model = _torchaudio_model(cls, args, args.device).train()
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    tokens = torch.from_numpy(np.asarray(b["inputs"])).long().to(args.device)
    lengths = torch.full((args.batch,), args.t_in, dtype=torch.long, device=args.device)
    mel = torch.from_numpy(np.asarray(b["mel_targets"])).transpose(1, 2).contiguous().to(args.device)
    mel_lengths = torch.full((args.batch,), args.frames, dtype=torch.long, device=args.device)
    gate = torch.zeros((args.batch, args.frames), device=args.device)
    gate[:, -1] = 1.0

    def ta_step(precision):
        def run():
            opt.zero_grad(set_to_none=True)
            ctx = (torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16) if precision == "bf16"
                   else torch.autocast(torch.device(args.device).type, enabled=False))
            with ctx:
                m, post, g, _ = model(tokens, lengths, mel, mel_lengths)
            loss = F.mse_loss(m.float(), mel) + F.mse_loss(post.float(), mel) + \
                F.binary_cross_entropy_with_logits(g.float(), gate)
            loss.backward()
            opt.step()
        return run

    for precision in ("fp32", "bf16"):
        out[f"torchaudio_{precision}_seconds"] = _timed(ta_step(precision), args.device, args.repeats)
        out[f"ratio_{precision}"] = out[f"ours_{precision}_seconds"] / out[f"torchaudio_{precision}_seconds"]
    out["target_met"] = out["ratio_fp32"] <= 1.0
    return out


def synthesis(args, full, hp, ta) -> dict:
    """Section 4."""
    import torch

    model = _model(args, hp, args.device)
    with torch.no_grad():
        model.decoder.stop_projection.dense.bias -= 30.0  # every step runs
    steps = math.ceil(args.synth_frames / hp.outputs_per_step)
    rng = np.random.default_rng(3)
    out = {"frames": args.synth_frames, "ours_r": hp.outputs_per_step}
    cls, note = ta
    ta_model = None
    if cls is not None:
        ta_model = _torchaudio_model(cls, args, args.device).eval()
        ta_model.decoder.gate_threshold = 2.0  # a sigmoid never reaches it: every step runs
        ta_model.decoder.decoder_max_step = args.synth_frames
        ta_model.decoder.decoder_early_stopping = False
    for batch in (1, args.batch):
        seqs = [np.append(rng.integers(28, 54, size=args.t_in - 1), 1) for _ in range(batch)]
        spk = rng.normal(size=(batch, hp.speaker_embedding_size)).astype(np.float32)
        out[f"ours_b{batch}_seconds"] = _timed(lambda: model.synthesize_batch(seqs, spk, max_iters=steps),
                                               args.device, args.synth_repeats)
        if ta_model is not None:
            tokens = torch.from_numpy(np.stack(seqs)).long().to(args.device)
            lengths = torch.full((batch,), args.t_in, dtype=torch.long, device=args.device)

            def infer():
                with torch.no_grad(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # "Reached max decoder steps": the stop is held off on purpose
                    return ta_model.infer(tokens, lengths)

            out[f"torchaudio_b{batch}_seconds"] = _timed(infer, args.device, args.synth_repeats)
            out[f"ratio_b{batch}"] = out[f"ours_b{batch}_seconds"] / out[f"torchaudio_b{batch}_seconds"]
    if ta_model is not None:
        out["target_met"] = out["ratio_b1"] <= 1.0
    from speechblocks.synthesis import decoder_loop_line

    out["ours_loop_b1"] = decoder_loop_line(model, "torch", 1)
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    p.add_argument("--model", help="a migrated torch Tacotron-2 (.pt); default: RTVC from TF1's initializers")
    p.add_argument("--out", required=True, help="the JSON of the results")
    p.add_argument("--tiny", action="store_true", help="tiny sizes, a few steps: the CPU smoke run")
    p.add_argument("--batch", type=int, help="training and synthesis batch (default 32; --tiny 2)")
    p.add_argument("--sections", default="equality,curves,training,synthesis")
    args = p.parse_args(argv)
    import torch

    from speechblocks.commands._common import torch_device

    args.device = str(torch_device(args.device))  # a missing GPU: one line, before anything runs
    tiny = args.tiny
    args.batch = args.batch or (2 if tiny else 32)
    args.t_in, args.frames = (6, 8) if tiny else (100, 400)
    args.equal_steps = 4 if tiny else 100
    args.curve_steps, args.curve_batch, args.curve_frames = (6, 2, 8) if tiny else (300, 32, 120)
    args.repeats, args.synth_repeats = (2, 1) if tiny else (5, 3)
    args.synth_frames = 8 if tiny else 400
    full, hp = _hparams(args)
    if args.model:
        import torch_layers

        hp = torch_layers.Tacotron2.from_migrated(args.model).hparams
        full = dict(full, **{k: getattr(hp, k) for k in ("num_mels", "outputs_per_step", "speaker_embedding_size")})
    ta = _torchaudio()
    result = {"device": args.device, "device_name": (torch.cuda.get_device_name(torch.device(args.device))
                                                     if args.device.startswith("cuda") else platform.processor()
                                                     or platform.machine()),
              "torch": torch.__version__, "tiny": tiny, "model": args.model or "RTVC, TF1 initializers, seed 0",
              "torchaudio": ta[1]}
    t_start = time.perf_counter()
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        result[name] = {"equality": equality, "curves": curves, "training": training,
                        "synthesis": synthesis}[name](args, full, hp, *((ta,) if name in ("training", "synthesis")
                                                                       else ()))
        result[name]["section_seconds"] = time.perf_counter() - t0
        print(f"gpu_check: {name} done in {result[name]['section_seconds']:.1f} s", flush=True)
        with open(args.out, "w", encoding="utf-8") as f:  # after every section: a cut-off run keeps what it did
            json.dump(dict(result, total_seconds=time.perf_counter() - t_start), f, indent=1)
            f.write("\n")
    _report(result)
    return result


def _report(r: dict) -> None:
    print(f"device {r['device']} ({r['device_name']}), torch {r['torch']}, {r['torchaudio']}")
    if "equality" in r:
        for mode in ("teacher_forced", "free_running"):
            e = r["equality"][mode]
            print(f"  {mode}: max |d| mel {e['mel_outputs']:.2e}, alignments {e['alignments']:.2e} over "
                  f"{e['steps']} steps ({'PASS' if e['passed'] else 'FAIL'} <= 1e-4)")
    if "curves" in r:
        s = r["curves"]["summary"]
        print(f"  curves fp32/bf16: first {s['first'][0]:.3f}/{s['first'][1]:.3f}, last tenth "
              f"{s['last_tenth_mean'][0]:.3f}/{s['last_tenth_mean'][1]:.3f}, max gap {s['max_abs_gap']:.3f}")
    if "training" in r:
        t = r["training"]
        line = f"  training step B={t['batch']}: ours fp32 {t['ours_fp32_seconds']:.3f} s, bf16 {t['ours_bf16_seconds']:.3f} s"
        if "torchaudio_fp32_seconds" in t:
            line += (f"; torchaudio fp32 {t['torchaudio_fp32_seconds']:.3f} s, bf16 {t['torchaudio_bf16_seconds']:.3f} s"
                     f" (ours/torchaudio {t['ratio_fp32']:.2f}x, {t['ratio_bf16']:.2f}x)")
        print(line)
    if "synthesis" in r:
        s = r["synthesis"]
        for key in sorted(k for k in s if k.startswith("ours_b")):
            b = key.split("_")[1]
            line = f"  synthesis {s['frames']} frames {b.upper()}: ours {s[key]:.3f} s"
            if f"torchaudio_{b}_seconds" in s:
                line += f", torchaudio {s[f'torchaudio_{b}_seconds']:.3f} s ({s[f'ratio_{b}']:.2f}x)"
            print(line)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
