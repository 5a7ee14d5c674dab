"""Every fenced example of ``README.md`` and ``docs/*.md`` runs here, so none can rot.

A fenced block declares what it is by its language:

* ``python`` -- run; the blocks of one page share one namespace, in page order (as a doctest file);
* ``sh`` -- every command line runs (``\\`` continues a line, ``#`` starts a comment) and must exit 0;
* ``console`` -- the lines after ``$ `` run, the other lines are their output; a command whose output holds
  ``error:`` must fail (exit 2 unless an ``echo $?`` line says otherwise), any other must exit 0;
* ``text`` (also ``json``, ``yaml``, ``c``) -- a listing or an output, not an example.

A block without a language fails the test (an example cannot hide as a listing). A block meant not to run is
marked on the line before it with ``<!-- no-run: the reason -->`` and counted (``python -m tests.test_doc_examples``
prints the counts per page).

``speechblocks ...`` commands run in this process through :func:`speechblocks.cli.main` (no interpreter start-up,
the frameworks imported once). Each page runs in its own copy of a small workspace holding the files the examples
name, made here in numpy: a small RTVC Tacotron-2 TF1 checkpoint at ``taco_pretrained/tacotron_model.ckpt-278000``
(random weights, the RTVC speaker embedding of 256), a small Rayhane one trained with ``predict_linear`` at
``model.ckpt-100``, a small keithito Tacotron-1 at ``tacotron-20180906/model.ckpt``, ``speaker.npy``, two
recordings ``me.wav`` and ``recording.wav`` (a synthetic voice), GE2E weights ``encoder.pt`` (random; also
``$SPEECHBLOCKS_GE2E_WEIGHTS``), the RTVC checkpoint migrated to torch, ``tacotron2.pt``, an asteroid-style
``separator.pth`` holding a ``TAC(64, 128)`` under ``masker.tac.``, and for ``speechblocks evaluate`` ``lines.txt``
(two sentences), ``held_out.txt`` (``NAME|sentence``) with its recordings in ``held_out/``. The checkpoints' sizes
are the examples' only difference from real ones.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = {"python", "sh", "console"}
LISTING = {"text", "json", "yaml", "c", "toml", "ini"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<lang>[\w+-]*)[ \t]*$")
NO_RUN = re.compile(r"^\s*<!--\s*no-run:\s*(?P<reason>\S.*?)\s*-->\s*$")
#: at least this many examples run (marking everything no-run must not pass)
MIN_RUN = 30


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    no_run: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Page:
    path: str
    blocks: list[Block] = field(default_factory=list)


def doc_pages() -> list[str]:
    """README.md and every page under docs/ (relative paths), sorted."""
    pages = ["README.md"]
    for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
        pages += [os.path.relpath(os.path.join(folder, f), ROOT) for f in files if f.endswith(".md")]
    return sorted(pages)


def parse(path: str) -> Page:
    """The fenced blocks of one Markdown file, each with its language, code (dedented) and no-run mark."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines()
    page, i = Page(path), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, start = m["indent"], m["fence"], i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = NO_RUN.match(before)
        page.blocks.append(Block(path, start + 1, m["lang"].lower(), "\n".join(body) + "\n",
                                 mark["reason"] if mark else None))
    return page


def counts(pages: list[Page]) -> dict[str, int]:
    examples = [b for p in pages for b in p.blocks if b.lang in RUN]
    return {"examples": len(examples), "run": sum(b.no_run is None for b in examples),
            "no-run": sum(b.no_run is not None for b in examples),
            "listings": sum(b.lang in LISTING for p in pages for b in p.blocks)}


# -- the workspace ----------------------------------------------------------------------------------------------------

def _write_checkpoint(prefix: str, tensors: dict) -> None:
    from tests.test_training_backend import _write_tf1_checkpoint

    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    _write_tf1_checkpoint(prefix, tensors)
    with open(os.path.join(os.path.dirname(prefix) or ".", "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{os.path.basename(prefix)}"\n')


def make_workspace(root: str) -> str:
    """The files the examples name (see the module docstring); returns ``root``."""
    import soundfile
    import torch

    import torch_layers
    from speechblocks import resolve_tacotron1_hparams
    from speechblocks.cli import main
    from speechblocks.tacotron1_schema import tf1_variable_shapes as tacotron1_shapes
    from tests.helpers.audio_signals import synthetic_speech
    from tests.helpers.tacotron2_checkpoint import STOP_BIAS, small_variables

    os.makedirs(root, exist_ok=True)
    # the stop projection: zero kernel, bias +3 -- the random model stops at its first decoder step (seconds
    # instead of max_iters = 2000 steps of random frames)
    for prefix, preset in (("taco_pretrained/tacotron_model.ckpt-278000", "rtvc"), ("model.ckpt-100", "rayhane")):
        kw = dict(speaker_embedding_size=256) if preset == "rtvc" else dict(predict_linear=True)
        _, variables = small_variables(preset, seed=1, stop_bias=3.0, **kw)
        stop_kernel = STOP_BIAS.replace("/bias", "/kernel")
        variables[stop_kernel] = np.zeros_like(variables[stop_kernel])
        tensors = {f"Tacotron_model/inference/{k}": v for k, v in variables.items()}
        tensors["global_step"] = np.array(int(prefix.rsplit("-", 1)[1]), np.int64)
        _write_checkpoint(os.path.join(root, prefix), tensors)
    hp = resolve_tacotron1_hparams("keithito", num_mels=8, num_freq=1025, outputs_per_step=2, embed_depth=8,
                                   prenet_depths=[8, 6], encoder_depth=8, attention_depth=6, decoder_depth=8,
                                   postnet_depth=8, max_iters=12)
    rng = np.random.default_rng(2)
    tensors = {}
    for name, shape in sorted(tacotron1_shapes(hp, "keithito-20180906").items()):
        value = rng.normal(0, 0.3, shape)
        tensors[f"model/inference/{name}"] = np.asarray(np.abs(value) + 0.5 if "moving_variance" in name else value,
                                                        np.float32)
    tensors["global_step"] = np.array(877000, np.int64)
    _write_checkpoint(os.path.join(root, "tacotron-20180906", "model.ckpt"), tensors)

    np.save(os.path.join(root, "speaker.npy"), (rng.standard_normal(256) / 16).astype(np.float32))
    for name, seed in (("me.wav", 0), ("recording.wav", 1)):
        soundfile.write(os.path.join(root, name), synthetic_speech(16000, 1.5, seed=seed), 16000)
    torch.manual_seed(0)
    torch.save(torch_layers.SpeakerEncoder().state_dict(), os.path.join(root, "encoder.pt"))
    tac = {f"masker.tac.{k}": v for k, v in torch_layers.TAC(64, 128).state_dict().items()}
    torch.save({"model_name": "ConvTasNet", "state_dict": {**tac, "masker.bottleneck.weight": torch.zeros(8, 4, 1)}},
               os.path.join(root, "separator.pth"))
    with open(os.path.join(root, "lines.txt"), "w") as f:
        f.write("Hello world.\nIn such a case.\n")
    os.makedirs(os.path.join(root, "held_out"))
    with open(os.path.join(root, "held_out.txt"), "w") as f:
        f.write("me|Hello world.\nrecording|In such a case.\n")
    for name in ("me.wav", "recording.wav"):
        shutil.copy(os.path.join(root, name), os.path.join(root, "held_out", name))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["migrate", os.path.join(root, "taco_pretrained/tacotron_model.ckpt-278000"), "--to", "torch",
                     os.path.join(root, "tacotron2.pt")]) == 0
    return root


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(str(tmp_path_factory.mktemp("doc-workspace")))


# -- running ----------------------------------------------------------------------------------------------------------

def _commands(block: Block) -> list[tuple[str, list[str]]]:
    """``(command line, output lines shown after it)`` of a shell block."""
    out: list[tuple[str, list[str]]] = []
    lines = block.code.splitlines()
    if block.lang == "sh":
        joined, buf = [], ""
        for line in lines:
            if line.rstrip().endswith("\\"):
                buf += line.rstrip()[:-1] + " "
                continue
            joined.append(buf + line)
            buf = ""
        return [(c, []) for c in joined if c.strip() and not c.lstrip().startswith("#")]
    i = 0
    while i < len(lines):
        if lines[i].startswith("$ "):
            cmd = lines[i][2:]
            while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
            shown = []
            while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
                i += 1
                shown.append(lines[i])
            out.append((cmd, shown))
        i += 1
    return out


def _run_command(command: str, block: Block, last: int) -> int:
    from speechblocks.cli import main

    argv = shlex.split(command, comments=True)
    if argv[:3] == ["python", "-m", "speechblocks"]:
        argv = ["speechblocks"] + argv[3:]
    if argv == ["echo", "$?"]:
        return last
    if not argv or argv[0] != "speechblocks":
        raise AssertionError(f"{block.where}: cannot run {command!r} here: run only `speechblocks ...` commands, "
                             "or mark the block <!-- no-run: reason -->")
    try:
        return main(argv[1:])
    except SystemExit as e:  # argparse: --help, a usage error
        return e.code if isinstance(e.code, int) else 2


def run_shell(block: Block) -> None:
    last = 0
    for command, shown in _commands(block):
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            status = _run_command(command, block, last)
        if command.strip() == "echo $?":
            expected = int(shown[0]) if shown else 0
            assert status == expected, f"{block.where}: `echo $?` shows {expected}, the command exited {status}"
        else:
            fails = any("error:" in line for line in shown)
            assert (status != 0) == fails, (f"{block.where}: {command!r} exited {status} (the page shows "
                                            f"{'an error' if fails else 'success'}):\n{sink.getvalue()[-3000:]}")
        last = status


def run_page(page: Page, folder: str) -> None:
    namespace = {"__name__": "__doc_example__"}
    for block in page.blocks:
        if block.lang not in RUN or block.no_run is not None:
            continue
        if block.lang == "python":
            sink = io.StringIO()
            try:
                with contextlib.redirect_stdout(sink):
                    exec(compile(block.code, block.where, "exec"), namespace)
            except Exception as e:
                raise AssertionError(f"{block.where}: {type(e).__name__}: {e}\n{sink.getvalue()[-2000:]}") from e
        else:
            run_shell(block)


PAGES = doc_pages()


@pytest.mark.parametrize("path", [p for p in PAGES if any(b.lang in RUN and b.no_run is None
                                                          for b in parse(p).blocks)])
def test_page_examples_run(path, workspace, tmp_path, monkeypatch):
    folder = str(tmp_path / "work")
    shutil.copytree(workspace, folder)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("SPEECHBLOCKS_GE2E_WEIGHTS", os.path.join(folder, "encoder.pt"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    run_page(parse(path), folder)


def test_every_block_is_labelled_and_counted():
    pages = [parse(p) for p in PAGES]
    problems = [f"{b.where}: a fenced block without a language (python, sh, console: runs; text: a listing)"
                for p in pages for b in p.blocks if not b.lang]
    problems += [f"{b.where}: unknown language {b.lang!r}" for p in pages for b in p.blocks
                 if b.lang and b.lang not in RUN | LISTING]
    problems += [f"{b.where}: a no-run mark on a listing" for p in pages for b in p.blocks
                 if b.no_run and b.lang in LISTING]
    assert not problems, "\n".join(problems)
    c = counts(pages)
    print(f"doc examples: {c['run']} run, {c['no-run']} marked no-run, {c['listings']} listings")
    assert c["run"] >= MIN_RUN and c["run"] > c["no-run"], c


def main() -> int:
    pages = [parse(p) for p in PAGES]
    for p in pages:
        c = counts([p])
        if c["examples"] or c["listings"]:
            print(f"{p.path:32s} run {c['run']:3d}  no-run {c['no-run']:3d}  listings {c['listings']:3d}")
            for b in p.blocks:
                if b.no_run:
                    print(f"    no-run {b.where}: {b.no_run}")
    c = counts(pages)
    print(f"total: {c['run']} run, {c['no-run']} marked no-run, {c['listings']} listings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
