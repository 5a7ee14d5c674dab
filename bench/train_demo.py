"""``make train-demo``: a Tacotron-2 that learns to speak on this machine, from recordings it makes itself, until a
recogniser understands it; ``make finetune-demo``: the same model fine-tuned on five minutes of another voice.

1. A single-speaker corpus: Debian's ``flite`` (voice ``slt``, 16 kHz) speaks sentences taken from the license
   texts every Debian machine has (``/usr/share/common-licenses``), ``x.wav`` + ``x.txt`` pairs; ten sentences are
   held out, their recordings in ``OUT/held_out/`` as ``speechblocks evaluate --reference-dir`` reads them.
2. ``speechblocks preprocess`` with the RTVC preset (16 kHz; GE2E speaker embeddings with resemblyzer's pretrained
   weights when ``make install`` fetched them).
3. ``speechblocks train``'s loop (torch) of a small Tacotron-2 from scratch, in chunks of steps (resume is exact, so
   the chunks change nothing but the evaluations between them), with the original loss, Adam and schedule, plus
   the guided-attention term (``--guided-attention 1.0``: not in the original recipe, off by default in
   ``speechblocks train``; without it no run aligned within 30 minutes here -- ``--guided-attention 0`` runs the
   original recipe alone).
4. After each chunk, ``speechblocks evaluate``'s scores of the last checkpoint on the held-out sentences (each
   conditioned on its reference's GE2E embedding): pocketsphinx's word and character error rates, MCD against the
   recording, GE2E similarity to it, alignment focus and monotonicity, the share that stops. The first chunk also
   scores the ceiling: the recordings' own Griffin-Lim resynthesis. It stops when the held-out WER is at most
   ``--target`` (2) x the ceiling's, or at the budget (60 minutes of training and scoring), then writes the per-chunk
   table (``OUT/chunks.jsonl``, ``OUT/summary.json``), the alignment pictures, the Griffin-Lim wavs and the loss
   curves (``OUT/samples/``).
5. ``--finetune awb`` (``make finetune-demo``): OUT's trained model continued (``train --from``) on the first
   training sentences spoken by ``awb`` (about five minutes), scored on the held-out sentences spoken by ``awb``:
   the similarity to ``awb``'s recordings against the similarity to ``slt``'s, and the WER, before and after each
   chunk; it stops once the synthesis is closer to ``awb`` than to ``slt`` with the WER within 1.5x the base
   model's on ``slt``, or at 15 minutes (``OUT/finetune-awb/``).

``python -m bench.train_demo [--sentences 400] [--minutes 60] [--chunk 300] [--guided-attention 1.0] [--target 2]
[--finetune awb|rms] [--out train-demo]``.
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


def make_corpus(directory: str, texts: list[str], voice: str = "slt") -> float:
    """``directory/0000.wav`` + ``0000.txt`` ... spoken by flite's ``voice`` (one directory per voice: a wav is
    spoken again only when its text changed); returns the seconds of audio."""
    import soundfile

    os.makedirs(directory, exist_ok=True)
    seconds = 0.0
    for i, t in enumerate(texts):
        wav, txt = (os.path.join(directory, f"{i:04d}{ext}") for ext in (".wav", ".txt"))
        said = open(txt).read() if os.path.exists(txt) else None
        if not os.path.exists(wav) or said != t + "\n":  # a wav of another run's sentence is spoken again
            subprocess.run(["flite", "-voice", voice, "-t", t, "-o", wav], check=True)
            with open(txt, "w") as f:
                f.write(t + "\n")
        seconds += soundfile.info(wav).duration
    for name in os.listdir(directory):  # another run's longer corpus: its extra utterances are not this one's
        if re.fullmatch(r"\d{4}\.(wav|txt)", name) and int(name[:4]) >= len(texts):
            os.remove(os.path.join(directory, name))
    return seconds


def alignment_scores(alignment: np.ndarray) -> tuple[float, float]:
    """``(focus, monotonicity)`` of one ``(T_in, steps)`` alignment."""
    from speechblocks.evaluation import alignment_scores as scores

    return scores(alignment)


def latest_model(run: str) -> tuple[str, int]:
    with open(os.path.join(run, "checkpoints", "latest.json")) as f:
        info = json.load(f)
    return os.path.join(run, "checkpoints", info["model"]), int(info["step"])


def held_out_set(directory: str, texts: list[str], voice: str = "slt") -> str:
    """The held-out sentences as ``speechblocks evaluate`` reads them: ``directory/held_out.txt`` (``NAME|text``
    lines) and each sentence's flite recording ``directory/NAME.wav``; returns the text file."""
    os.makedirs(directory, exist_ok=True)
    make_corpus(directory, texts, voice)
    path = os.path.join(directory, "held_out.txt")
    with open(path, "w") as f:
        f.writelines(f"{i:04d}|{t}\n" for i, t in enumerate(texts))
    return path


class Scorer:
    """``speechblocks evaluate``'s scores of a checkpoint on the held-out set, its pieces loaded once: the recogniser,
    the GE2E encoder (the pretrained weights), the references and their embeddings (each sentence is spoken in its
    reference's voice and its similarity measured to it, as ``evaluate --reference-dir`` does). The first call also
    scores the ceiling (the references' own Griffin-Lim resynthesis, and the recordings); later calls the model
    alone (``pipeline.score(ceiling=False)``)."""

    def __init__(self, text_file: str, similarity_wav: str | None = None):
        from speechblocks.audio import audio_hparams
        from speechblocks.audio_commands import load_speaker_encoder
        from speechblocks.evaluation import Recognizer, pipeline

        self.pipeline = pipeline
        self.sentences = pipeline.read_sentences(text_file)
        self.audio_hp = audio_hparams("rtvc")
        paths = pipeline.find_references(os.path.dirname(text_file), self.sentences)
        self.references = [pipeline.load_reference(p, self.audio_hp) for p in paths]
        self.encoder = load_speaker_encoder(None, "torch")
        sr = int(self.audio_hp.sample_rate)
        self.embeddings = np.stack([self.embed(w, sr) for w in self.references])
        #: the similarity target: None (each sentence's reference) or one recording of another voice
        self.target = None if similarity_wav is None else np.asarray(self.encoder.embed_wav(similarity_wav),
                                                                     np.float32)
        self.recognizer = Recognizer()
        self.ceiling: dict | None = None

    def embed(self, wav, rate) -> np.ndarray:
        return np.asarray(self.encoder.embed_wav(wav, source_sr=rate), np.float32)

    def __call__(self, checkpoint: str, conditioning: np.ndarray | None = None) -> tuple[dict, list]:
        """``(report, spoken)`` of ``checkpoint`` (``pipeline.score``'s report; ``spoken`` the model's speech)."""
        import torch_layers
        from speechblocks.synthesis import encode_texts

        model = torch_layers.Tacotron2.from_migrated(checkpoint).eval()
        p, sr = self.pipeline, int(self.audio_hp.sample_rate)
        encoded = encode_texts([s.text for s in self.sentences])
        embeddings = self.embeddings if conditioning is None else np.repeat(conditioning[None], len(encoded), 0)
        spoken, seconds = p.synthesize_wavs(model, "tacotron2", "torch", encoded, embeddings, self.audio_hp, seed=0)
        first = self.ceiling is None
        resynthesized = p.resynthesize(self.references, "tacotron2", self.audio_hp, seed=0) if first else None
        report = p.score(self.sentences, ("english_cleaners",), spoken, sr, self.recognizer,
                         references=self.references, resynthesized=resynthesized, embed=self.embed,
                         speaker_embedding=self.target, synthesis_seconds=seconds, ceiling=first)
        if first:
            self.ceiling = {k: v for k, v in report["total"].items() if k != "model"}
        return report, spoken


def chunk_row(step: int, minutes: float, loss: float, total: dict) -> dict:
    """One row of the per-chunk table."""
    m = total["model"]
    return {"step": step, "minutes": round(minutes, 2), "loss": round(loss, 4), "focus": round(m["focus"], 3),
            "monotonicity": round(m["monotonicity"], 3), "stopped_share": m["stopped_share"],
            "wer": round(m["wer"], 4), "cer": round(m["cer"], 4),
            "mcd": None if m.get("mcd") is None else round(m["mcd"], 3),
            "similarity": None if m.get("similarity") is None else round(m["similarity"], 4)}


def table(history: list[dict]) -> str:
    """The per-chunk table as Markdown."""
    to_slt = any("similarity_to_slt" in h for h in history)  # the fine-tune demo's second similarity
    lines = ["| step | min | loss | focus | monotonic | stopped | WER | CER | MCD dB | similarity |"
             + (" to slt |" if to_slt else ""), "|---:" * (11 if to_slt else 10) + "|"]
    num = lambda v, spec: "-" if v is None or v != v else format(v, spec)  # noqa: E731 (None or NaN: "-")
    for h in history:
        lines.append(f"| {h['step']} | {h['minutes']:.1f} | {num(h['loss'], '.3f')} | {h['focus']:.3f} | "
                     f"{h['monotonicity']:.0%} | {h['stopped_share']:.0%} | {h['wer']:.1%} | {h['cer']:.1%} | "
                     f"{num(h['mcd'], '.2f')} | {num(h['similarity'], '.3f')} |"
                     + (f" {num(h.get('similarity_to_slt'), '.3f')} |" if to_slt else ""))
    return "\n".join(lines)


def write_samples(out: str, texts: list[str], spoken: list, report: dict, sample_rate: int) -> None:
    """The held-out alignments (pictures) and Griffin-Lim wavs of the last evaluation."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from speechblocks.audio import save_wav

    os.makedirs(out, exist_ok=True)
    for i, (text, sp, row) in enumerate(zip(texts, spoken, report["sentences"])):
        m = row["model"]
        fig, a = plt.subplots(1, 1, figsize=(8, 3.5))
        a.imshow(sp.alignment, aspect="auto", origin="lower", interpolation="none")
        a.set_title(f"{text[:60]}\nfocus {m['focus']:.2f}, monotonic {m['monotonicity']:.0%}, WER {m['wer']:.0%}; "
                    f"heard: {m['heard'][:50]!r}", fontsize=8)
        a.set_xlabel("decoder step")
        a.set_ylabel("input symbol")
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"heldout_{i}.png"), dpi=80)
        plt.close(fig)
        save_wav(sp.wav, os.path.join(out, f"heldout_{i}.wav"), sample_rate)


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


def _train_until(args, options_for, scorer: Scorer, run: str, done, minutes: float, log: str,
                 conditioning=None, extra=None) -> tuple[list, list, dict, list]:
    """Chunks of ``args.chunk`` steps, each scored by ``scorer``, until ``done(row)`` or ``minutes`` of wall clock
    (training and scoring). Returns ``(history, losses, last report, last spoken)``."""
    from speechblocks.training.run import train
    from torch_layers.tacotron2_trainer import Tacotron2Trainer

    losses: list = []
    step_seconds: list = []

    def record(step, result):
        losses.append((step, dict(result.losses)))

    history: list = []
    t0 = time.perf_counter()
    report = spoken = None
    while time.perf_counter() - t0 < minutes * 60:
        result = train(Tacotron2Trainer, options_for(), on_step=record)
        step_seconds += [t for _, t, _ in result.timings]
        path, step = latest_model(run)
        report, spoken = scorer(path, conditioning)
        row = chunk_row(step, (time.perf_counter() - t0) / 60, float(np.mean([x["loss"] for _, x in losses[-50:]])),
                        report["total"])
        if extra is not None:
            row.update(extra(report, spoken))
        history.append(row)
        with open(log, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(" ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        if done(row):
            break
    if step_seconds:
        print(f"optimizer step: median {np.median(step_seconds) * 1000:.0f} ms over {len(step_seconds)} steps",
              flush=True)
    return history, losses, report, spoken


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.train_demo", description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=400)
    p.add_argument("--held-out", type=int, default=10)
    p.add_argument("--minutes", type=float, help="budget, wall clock of training and scoring (default 60; with "
                                                 "--finetune 15)")
    p.add_argument("--chunk", type=int, default=300, help="steps between evaluations")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-words", type=int, default=9, help="longest training sentence")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override an hparam of the small model (VALUE as JSON), e.g. --set outputs_per_step=5")
    p.add_argument("--guided-attention", type=float, metavar="WEIGHT", default=1.0,
                   help="the weight of the guided-attention loss (not in the original recipe; reported in the "
                        "summary); 0: the original recipe alone")
    p.add_argument("--target", type=float, default=2.0, metavar="FACTOR",
                   help="stop when the held-out WER is at most FACTOR x the WER of the references' own Griffin-Lim "
                        "resynthesis (the ceiling; default 2)")
    p.add_argument("--finetune", choices=("awb", "rms"),
                   help="fine-tune OUT's trained model on ~5 minutes of this flite voice instead (make "
                        "finetune-demo); --minutes is then its budget (default 15)")
    p.add_argument("--finetune-audio", type=float, default=5.0, metavar="MINUTES",
                   help="with --finetune: minutes of the new voice's audio")
    p.add_argument("--out", default="train-demo")
    p.add_argument("--resume", action="store_true", help="continue OUT's run (default: train it again from scratch)")
    args = p.parse_args(argv)
    if shutil.which("flite") is None:
        raise SystemExit("make train-demo needs Debian's flite (apt-get install flite)")
    train_texts, held_out = sentences(args.sentences, args.held_out, args.max_words)
    if args.finetune:
        return finetune(args, train_texts, held_out)
    from speechblocks.cli import main as cli
    from speechblocks.training.run import TrainOptions

    t_all = time.perf_counter()
    corpus, data, run = (os.path.join(args.out, d) for d in ("corpus", "data", "run"))
    seconds = make_corpus(corpus, train_texts)
    text_file = held_out_set(os.path.join(args.out, "held_out"), held_out)
    print(f"corpus: {len(train_texts)} flite sentences, {seconds / 60:.1f} min of audio; {len(held_out)} held out "
          f"({time.perf_counter() - t_all:.0f} s)", flush=True)
    if _preprocess(cli, corpus, data, train_texts):
        return 1
    if os.path.exists(run) and not args.resume:
        shutil.rmtree(run)  # a demo trains from scratch
    model = dict(SMALL)
    for item in args.set:
        name, value = item.split("=", 1)
        model[name] = json.loads(value)
    scorer = Scorer(text_file)
    log = os.path.join(args.out, "chunks.jsonl")
    if os.path.exists(log) and not args.resume:
        os.remove(log)
    state: dict = {}

    def done(row):
        if row["focus"] >= 0.5 and row["monotonicity"] >= 0.9 and "aligned_minutes" not in state:
            state["aligned_minutes"], state["aligned_step"] = row["minutes"], row["step"]
        return row["wer"] <= args.target * scorer.ceiling["resynthesis"]["wer"]

    def options():
        return TrainOptions(data, run, "rtvc", model, steps=args.chunk, batch_size=args.batch_size,
                            progress=False, guided_attention=args.guided_attention or 0.0)

    history, losses, report, spoken = _train_until(args, options, scorer, run, done, args.minutes or 60.0, log)
    samples = os.path.join(args.out, "samples")
    write_samples(samples, held_out, spoken, report, int(scorer.audio_hp.sample_rate))
    _plot_losses(losses, os.path.join(samples, "loss_curves.png"))
    ceiling = scorer.ceiling
    target = args.target * ceiling["resynthesis"]["wer"]
    reached = history[-1]["wer"] <= target
    summary = {"sentences": len(train_texts), "held_out": len(held_out), "audio_minutes": seconds / 60,
               "batch_size": args.batch_size, "chunk": args.chunk, "model": model,
               "guided_attention": args.guided_attention, "history": history, "ceiling": ceiling,
               "target_wer": target, "reached": reached,
               "minutes_to_target": history[-1]["minutes"] if reached else None,
               "aligned_step": state.get("aligned_step"), "aligned_minutes": state.get("aligned_minutes"),
               "losses": [(step, x) for step, x in losses if step % 50 == 0],
               "total_minutes": (time.perf_counter() - t_all) / 60}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(table(history))
    print(f"ceiling (references' Griffin-Lim resynthesis): WER {ceiling['resynthesis']['wer']:.1%}, MCD "
          f"{ceiling['resynthesis']['mcd']:.2f} dB, similarity {ceiling['resynthesis']['similarity']:.3f}; "
          f"recordings WER {ceiling['recording']['wer']:.1%}; target WER <= {target:.1%}: "
          f"{'reached' if reached else 'NOT reached'} after {history[-1]['minutes']:.1f} min", flush=True)
    return 0


def _preprocess(cli, corpus: str, data: str, texts: list[str]) -> int:
    fingerprint = os.path.join(data, "corpus.json")
    if os.path.exists(data) and (not os.path.exists(fingerprint) or json.load(open(fingerprint)) != texts):
        shutil.rmtree(data)  # preprocessed from another corpus
    if not os.path.exists(os.path.join(data, "train.txt")):
        t = time.perf_counter()
        if cli(["preprocess", corpus, data, "--hparams", "rtvc", "--quiet"]):
            return 1
        print(f"preprocess: {time.perf_counter() - t:.0f} s", flush=True)
        with open(fingerprint, "w") as f:
            json.dump(texts, f)
    return 0


def _cosines(scorer: Scorer, spoken: list, targets: np.ndarray) -> float | None:
    """The mean GE2E cosine similarity of the spoken sentences to ``targets`` (one embedding per sentence); a
    sentence holding no speech the encoder keeps is left out, as ``evaluate`` does."""
    sr = int(scorer.audio_hp.sample_rate)
    values = []
    for s, t in zip(spoken, targets):
        try:
            e = scorer.embed(s.wav, sr)
        except ValueError:
            continue
        values.append(float(np.dot(e, t) / max(float(np.linalg.norm(e) * np.linalg.norm(t)), 1e-12)))
    return float(np.mean(values)) if values else None


def finetune(args, train_texts: list[str], held_out: list[str]) -> int:
    """``--finetune VOICE``: OUT's trained ``slt`` model fine-tuned (``speechblocks train --from``) on about
    ``--finetune-audio`` minutes of ``VOICE`` (the first training sentences spoken by it), scored on the held-out
    sentences spoken by ``VOICE``: GE2E similarity to ``VOICE``'s recordings against the similarity to ``slt``'s,
    and the WER, before (the base model conditioned on ``VOICE``) and after each chunk."""
    from speechblocks.cli import main as cli
    from speechblocks.training.run import TrainOptions

    base_run = os.path.join(args.out, "run")
    if not os.path.exists(os.path.join(base_run, "checkpoints", "latest.json")):
        raise SystemExit(f"--finetune needs the trained model of `make train-demo` in {base_run}")
    base, base_step = latest_model(base_run)
    voice, minutes = args.finetune, args.minutes or 15.0
    t_all = time.perf_counter()
    root = os.path.join(args.out, f"finetune-{voice}")
    corpus, data, run = (os.path.join(root, d) for d in ("corpus", "data", "run"))
    chosen, seconds = [], 0.0
    for t in train_texts:  # the first training sentences, spoken by the new voice, up to --finetune-audio minutes
        if seconds >= args.finetune_audio * 60:
            break
        chosen.append(t)
        seconds = make_corpus(corpus, chosen, voice)
    text_file = held_out_set(os.path.join(root, "held_out"), held_out, voice)
    slt_file = held_out_set(os.path.join(args.out, "held_out"), held_out)
    print(f"fine-tune corpus: {len(chosen)} sentences spoken by {voice}, {seconds / 60:.1f} min of audio", flush=True)
    if _preprocess(cli, corpus, data, chosen):
        return 1
    if os.path.exists(run) and not args.resume:
        shutil.rmtree(run)
    scorer = Scorer(text_file)
    slt = Scorer(slt_file)
    slt_targets = slt.embeddings

    def extra(report, spoken):
        value = _cosines(scorer, spoken, slt_targets)
        return {"similarity_to_slt": None if value is None else round(value, 4)}

    before, before_spoken = scorer(base)
    before_row = chunk_row(base_step, 0.0, float("nan"), before["total"])
    before_row.update(extra(before, before_spoken))
    print("before: " + " ".join(f"{k} {v}" for k, v in before_row.items()), flush=True)
    base_slt, _ = slt(base)  # the base model on its own voice: the WER the fine-tuned one is held to
    base_wer = base_slt["total"]["model"]["wer"]
    log = os.path.join(root, "chunks.jsonl")
    if os.path.exists(log):
        os.remove(log)
    model = dict(SMALL)

    def options():
        if os.path.exists(os.path.join(run, "checkpoints", "latest.json")):
            return TrainOptions(data, run, None, {}, steps=args.chunk, batch_size=args.batch_size, progress=False)
        return TrainOptions(data, run, None, {}, source=base, steps=args.chunk, batch_size=args.batch_size,
                            progress=False, guided_attention=args.guided_attention or 0.0)

    def done(row):
        if row["similarity"] is None or row["similarity_to_slt"] is None:
            return False
        return row["similarity"] > row["similarity_to_slt"] and row["wer"] <= 1.5 * base_wer

    history, losses, report, spoken = _train_until(args, options, scorer, run, done, minutes, log, extra=extra)
    write_samples(os.path.join(root, "samples"), held_out, spoken, report, int(scorer.audio_hp.sample_rate))
    summary = {"voice": voice, "sentences": len(chosen), "audio_minutes": seconds / 60, "base": base,
               "base_step": base_step, "base_wer_slt": base_wer, "before": before_row, "history": history,
               "ceiling": scorer.ceiling, "model": model, "reached": bool(history and done(history[-1])),
               "total_minutes": (time.perf_counter() - t_all) / 60}
    with open(os.path.join(root, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(table([before_row] + history))
    last = history[-1]
    f = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"similarity to {voice}: {f(before_row['similarity'])} -> {f(last['similarity'])}; to slt: "
          f"{f(before_row['similarity_to_slt'])} -> {f(last['similarity_to_slt'])}; WER {before_row['wer']:.1%} -> "
          f"{last['wer']:.1%} (the base model on slt: {base_wer:.1%}); {last['minutes']:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
