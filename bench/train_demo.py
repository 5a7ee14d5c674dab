"""``make train-demo``: a Tacotron-2 that learns to speak on this machine, from recordings it makes itself.

1. A single-speaker corpus: Debian's ``flite`` (voice ``slt``, 16 kHz) speaks sentences taken from the license
   texts every Debian machine has (``/usr/share/common-licenses``), ``x.wav`` + ``x.txt`` pairs; a few sentences
   are held out.
2. ``speechblocks preprocess`` with the RTVC preset (16 kHz; GE2E speaker embeddings with resemblyzer's pretrained
   weights when ``make install`` fetched them).
3. ``speechblocks train``'s loop (torch) of a small Tacotron-2 from scratch, in chunks of steps (resume is exact, so
   the chunks change nothing but the evaluations between them), with the original loss, Adam and schedule, plus
   the guided-attention term (``--guided-attention 1.0``: not in the original recipe, off by default in
   ``speechblocks train``; without it no run aligned within the budget here -- ``--guided-attention 0`` runs the
   original recipe alone).
4. After each chunk, the held-out sentences are synthesized from the last checkpoint and their alignments scored:
   **focus** (mean over decoder steps of the largest attention weight) and **monotonicity** (share of steps whose
   argmax does not move back). It stops when focus >= 0.5 and monotonicity >= 0.9 (a diagonal) or at the time
   budget, then writes the alignment pictures, Griffin-Lim wavs, the loss curves and a summary to ``OUT``.

``python -m bench.train_demo [--sentences 400] [--minutes 30] [--chunk 300] [--guided-attention 1.0] [--out
train-demo]``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

#: a small model (the preset's other hparams, loss and schedule unchanged); scalars every 100 steps
SMALL = {"embedding_dim": 128, "enc_conv_channels": 128, "encoder_lstm_units": 64, "attention_dim": 64,
         "attention_filters": 16, "prenet_layers": [128, 128], "decoder_lstm_units": 192, "postnet_channels": 128,
         "outputs_per_step": 5, "max_iters": 200, "tacotron_summary_interval": 100}


def sentences(n: int, held_out: int, max_words: int = 12) -> tuple[list[str], list[str]]:
    """``n`` training and ``held_out`` test sentences from the machine's license texts (4 to ``max_words`` words,
    plain characters), deterministic."""
    text = " ".join(open(f, errors="ignore").read() for f in sorted(glob.glob("/usr/share/common-licenses/*"))
                    if os.path.isfile(f))
    text = re.sub(r"\s+", " ", text)
    out = []
    for s in re.split(r"(?<=[.;:!?])\s+", text):
        parts = [s] if len(s.split()) <= max_words else re.split(r"(?<=[,;])\s+", s)
        out += [p.strip() for p in parts
                if 4 <= len(p.split()) <= max_words and re.fullmatch(r"[A-Za-z ,.;:'()-]+", p)]
    out = list(dict.fromkeys(out))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(out))
    chosen = [out[i] for i in order[: n + held_out]]
    if len(chosen) < n + held_out:
        raise SystemExit(f"only {len(out)} sentences found in /usr/share/common-licenses")
    return chosen[:n], chosen[n:]


def make_corpus(directory: str, texts: list[str]) -> float:
    """``directory/0000.wav`` + ``0000.txt`` ...; returns the seconds of audio."""
    import soundfile

    os.makedirs(directory, exist_ok=True)
    seconds = 0.0
    for i, t in enumerate(texts):
        wav, txt = (os.path.join(directory, f"{i:04d}{ext}") for ext in (".wav", ".txt"))
        said = open(txt).read() if os.path.exists(txt) else None
        if not os.path.exists(wav) or said != t + "\n":  # a wav of another run's sentence is spoken again
            subprocess.run(["flite", "-voice", "slt", "-t", t, "-o", wav], check=True)
            with open(txt, "w") as f:
                f.write(t + "\n")
        seconds += soundfile.info(wav).duration
    return seconds


def alignment_scores(alignment: np.ndarray) -> tuple[float, float]:
    """``(focus, monotonicity)`` of one ``(T_in, steps)`` alignment."""
    focus = float(alignment.max(axis=0).mean())
    peaks = alignment.argmax(axis=0)
    mono = float(np.mean(np.diff(peaks) >= 0)) if peaks.size > 1 else 1.0
    return focus, mono


def latest_model(run: str) -> tuple[str, int]:
    with open(os.path.join(run, "checkpoints", "latest.json")) as f:
        info = json.load(f)
    return os.path.join(run, "checkpoints", info["model"]), int(info["step"])


def evaluate(run: str, held_out: list[str], embedding: np.ndarray, out: str | None = None) -> dict:
    """Synthesizes the held-out sentences with the last checkpoint; the mean scores (and, with ``out``, the
    pictures and wavs)."""
    import torch

    import torch_layers
    from speechblocks.synthesis import encode_texts

    path, step = latest_model(run)
    model = torch_layers.Tacotron2.from_migrated(path).eval()
    encoded = encode_texts(held_out)
    torch.manual_seed(0)
    with torch.inference_mode():
        outs = model.synthesize_batch([ids for _, ids in encoded],
                                      speaker_embeddings=np.repeat(embedding[None], len(held_out), 0))
    scores = [alignment_scores(o["alignments"]) for o in outs]
    result = {"step": step, "focus": float(np.mean([s[0] for s in scores])),
              "monotonicity": float(np.mean([s[1] for s in scores])),
              "stopped": int(sum(bool(o["stopped"]) for o in outs))}
    if out:
        _write_samples(out, model, held_out, outs, scores)
    return result


def _write_samples(out: str, model, texts, outs, scores) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from speechblocks.audio import inv_mel_spectrogram, save_wav
    from speechblocks.audio_commands import model_audio_hparams

    hp = model_audio_hparams(model)
    os.makedirs(out, exist_ok=True)
    for i, (text, o, (focus, mono)) in enumerate(zip(texts, outs, scores)):
        fig, (a, m) = plt.subplots(2, 1, figsize=(8, 6))
        a.imshow(o["alignments"], aspect="auto", origin="lower", interpolation="none")
        a.set_title(f"{text[:60]}\nfocus {focus:.2f}, monotonic {mono:.0%}", fontsize=9)
        a.set_xlabel("decoder step")
        a.set_ylabel("input symbol")
        m.imshow(o["mel_outputs"].T, aspect="auto", origin="lower", interpolation="none")
        m.set_xlabel("frame")
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"heldout_{i}.png"), dpi=80)
        plt.close(fig)
        save_wav(inv_mel_spectrogram(o["mel_outputs"], hp, seed=0), os.path.join(out, f"heldout_{i}.wav"),
                 hp.sample_rate)


def _plot_losses(losses: list, path: str) -> None:
    """The loss terms over the steps (a running mean of 25 steps)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    steps = np.array([step for step, _ in losses])
    fig, ax = plt.subplots(figsize=(8, 4))
    for key in ("loss", "before_loss", "after_loss", "stop_token_loss", "linear_loss", "guided_attention_loss"):
        if losses and key in losses[-1][1]:
            values = np.array([x.get(key, np.nan) for _, x in losses], np.float64)
            smooth = np.convolve(values, np.ones(25) / 25, mode="valid") if values.size >= 25 else values
            ax.plot(steps[len(steps) - smooth.size:], smooth, label=key)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.train_demo", description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=400)
    p.add_argument("--held-out", type=int, default=6)
    p.add_argument("--minutes", type=float, default=30.0, help="training budget (wall clock)")
    p.add_argument("--chunk", type=int, default=300, help="steps between evaluations")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-words", type=int, default=9, help="longest training sentence")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override an hparam of the small model (VALUE as JSON), e.g. --set outputs_per_step=5")
    p.add_argument("--guided-attention", type=float, metavar="WEIGHT", default=1.0,
                   help="the weight of the guided-attention loss (not in the original recipe; reported in the "
                        "summary); 0: the original recipe alone")
    p.add_argument("--out", default="train-demo")
    p.add_argument("--resume", action="store_true", help="continue OUT's run (default: train it again from scratch)")
    args = p.parse_args(argv)
    if shutil.which("flite") is None:
        raise SystemExit("make train-demo needs Debian's flite (apt-get install flite)")
    from speechblocks.cli import main as cli

    t_all = time.perf_counter()
    train_texts, held_out = sentences(args.sentences, args.held_out, args.max_words)
    corpus, data, run = (os.path.join(args.out, d) for d in ("corpus", "data", "run"))
    seconds = make_corpus(corpus, train_texts)
    print(f"corpus: {len(train_texts)} flite sentences, {seconds / 60:.1f} min of audio "
          f"({time.perf_counter() - t_all:.0f} s)", flush=True)
    fingerprint = os.path.join(data, "corpus.json")
    if os.path.exists(data) and (not os.path.exists(fingerprint) or json.load(open(fingerprint)) != train_texts):
        shutil.rmtree(data)  # preprocessed from another corpus
    if os.path.exists(run) and not args.resume:
        shutil.rmtree(run)  # a demo trains from scratch
    if not os.path.exists(os.path.join(data, "train.txt")):
        t = time.perf_counter()
        if cli(["preprocess", corpus, data, "--hparams", "rtvc", "--quiet"]):
            return 1
        print(f"preprocess: {time.perf_counter() - t:.0f} s", flush=True)
        with open(fingerprint, "w") as f:
            json.dump(train_texts, f)
    embeds = sorted(glob.glob(os.path.join(data, "embeds", "*.npy")))
    embedding = np.mean([np.load(e) for e in embeds[:20]], 0)
    embedding = (embedding / np.linalg.norm(embedding)).astype(np.float32)
    from speechblocks.training.run import TrainOptions, train
    from torch_layers.tacotron2_trainer import Tacotron2Trainer

    model = dict(SMALL)
    for item in args.set:
        name, value = item.split("=", 1)
        model[name] = json.loads(value)
    losses: list = []
    record = lambda step, result: losses.append((step, dict(result.losses)))  # noqa: E731
    history = []
    t_train = time.perf_counter()
    while time.perf_counter() - t_train < args.minutes * 60:
        options = TrainOptions(data, run, "rtvc", model, steps=args.chunk, batch_size=args.batch_size,
                               progress=False, guided_attention=args.guided_attention or 0.0)
        train(Tacotron2Trainer, options, on_step=record)
        score = evaluate(run, held_out, embedding)
        score["minutes"] = (time.perf_counter() - t_train) / 60
        history.append(score)
        print(f"step {score['step']}: focus {score['focus']:.3f}, monotonic {score['monotonicity']:.3f}, "
              f"stopped {score['stopped']}/{len(held_out)}, loss {np.mean([x['loss'] for _, x in losses[-50:]]):.3f}"
              f" ({score['minutes']:.1f} min)", flush=True)
        if score["focus"] >= 0.5 and score["monotonicity"] >= 0.9:
            break
    final = evaluate(run, held_out, embedding, out=os.path.join(args.out, "samples"))
    final["minutes"] = (time.perf_counter() - t_train) / 60
    _plot_losses(losses, os.path.join(args.out, "samples", "loss_curves.png"))
    summary = {"sentences": len(train_texts), "audio_minutes": seconds / 60, "batch_size": args.batch_size,
               "chunk": args.chunk, "model": model, "guided_attention": args.guided_attention,
               "history": history, "final": final,
               "losses": [(step, x) for step, x in losses if step % 50 == 0],
               "aligned": final["focus"] >= 0.5 and final["monotonicity"] >= 0.9,
               "total_minutes": (time.perf_counter() - t_all) / 60}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(final), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
