"""``speechblocks griffin-lim``: a mel (or linear) spectrogram back to a wav."""
from __future__ import annotations

import os

from .. import audio_commands, synthesis
from ._common import load_tensorflow, progress, torch_device, user_input
from ._options import device_option, hparams_options, overrides

NAME = "griffin-lim"
HELP = "a mel (or linear) spectrogram back to a wav"
DESCRIPTION = ("Inverts each [frames, num_mels] .npy spectrogram with Griffin-Lim as the original did (denormalise, "
               "dB to amplitude, mel pseudo-inverse, power, Griffin-Lim, inverse pre-emphasis) and writes a 16-bit "
               "wav, peak-normalised as the original.")
EXAMPLES = """examples:
  speechblocks griffin-lim hello.npy --hparams rtvc --out hello.wav
  speechblocks griffin-lim mels/*.npy --hparams rayhane --griffin-lim-iters 30 --out wavs/"""


def add_arguments(p) -> None:
    p.add_argument("spectrogram", nargs="+", metavar="SPEC.npy")
    hparams_options(p, "the audio hparams")
    p.add_argument("--linear", action="store_true", help="the inputs are linear spectrograms [frames, num_freq]")
    p.add_argument("--framework", choices=audio_commands.GL_FRAMEWORKS, default="torch",
                   help="where Griffin-Lim runs: torch (default, fast), keras (TensorFlow) or numpy (the original "
                        "loop)")
    p.add_argument("--griffin-lim-iters", type=int, metavar="N", help="iterations (default: the hparam, 60)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial phases (default 0)")
    p.add_argument("--out", required=True, help="one file: the .wav; several: a directory of <name>.wav")
    device_option(p, "torch's Griffin-Lim")
    p.add_argument("--quiet", action="store_true", help="no progress line on a terminal")


def run(args) -> int:
    with user_input():  # the preset and the audio --set values
        hp = audio_commands.audio_hparams_for(args.hparams, overrides(args.set))
    channels, what = (hp.num_freq, "linear spectrogram") if args.linear else (hp.num_mels, "mel spectrogram")
    specs = [audio_commands.read_spectrogram(p, channels, what) for p in args.spectrogram]
    stems = [os.path.splitext(os.path.basename(p))[0] for p in args.spectrogram]
    outputs = synthesis.output_files(args.out, stems, ".wav")
    device = None
    if args.framework == "torch":
        device = torch_device(args.device)
    elif args.framework == "keras":
        load_tensorflow(args.device)
    wavs = audio_commands.griffin_lim_wavs(specs, hp, args.framework, args.griffin_lim_iters, args.seed,
                                           linear=args.linear, progress=progress(NAME, args.quiet), device=device)
    audio_commands.write_wavs(wavs, outputs, hp.sample_rate)
    for p, w in zip(outputs, wavs):
        print(f"{p}: {w.shape[0] / hp.sample_rate:.2f} s at {hp.sample_rate} Hz")
    return 0
