"""``speechblocks embed``: the GE2E speaker embedding of recordings."""
from __future__ import annotations

import os

import numpy as np

from .. import audio_commands, synthesis
from ._common import load_tensorflow, progress, torch_device, user_input
from ._options import device_option, existing_file, require

NAME = "embed"
HELP = "the GE2E speaker embedding of recordings"
DESCRIPTION = ("The speaker embedding of each recording as the RTVC encoder computes it (16 kHz, volume "
               "normalisation, long silences trimmed, partial windows of 1.6 s averaged, L2-normalised), written "
               "as a .npy of shape [256].")
EXAMPLES = """examples:
  speechblocks embed encoder.pt me.wav --out me.npy    # or --encoder encoder.pt
  speechblocks embed refs/*.wav --out embeds/           # resemblyzer's weights fetched by make install"""


def add_arguments(p) -> None:
    p.add_argument("wav", nargs="+", metavar="[ENCODER.pt] WAV",
                   help="audio files (wav, flac, ogg), optionally after the encoder's weights file")
    p.add_argument("--encoder", metavar="ENCODER.pt",
                   help="GE2E weights (RTVC encoder.pt or resemblyzer pretrained.pt; default: "
                        "$SPEECHBLOCKS_GE2E_WEIGHTS or the weights make install fetched)")
    p.add_argument("--framework", choices=("torch", "keras"), default="torch")
    p.add_argument("--out", required=True, help="one file: the .npy; several: a directory of <name>.npy")
    device_option(p, "the torch speaker encoder")
    p.add_argument("--quiet", action="store_true", help="no progress line on a terminal")


def run(args) -> int:
    if args.encoder is None and len(args.wav) > 1 and args.wav[0].endswith((".pt", ".pth", ".ckpt")):
        args.encoder, args.wav = args.wav[0], args.wav[1:]  # `speechblocks embed ENCODER.pt REF.wav ...`
    wavs = [require(existing_file()(p)) for p in args.wav]  # after the encoder is told apart from the recordings
    stems = [os.path.splitext(os.path.basename(p))[0] for p in wavs]
    outputs = synthesis.output_files(args.out, stems)
    device = None
    if args.framework == "torch":
        device = torch_device(args.device)
    else:
        load_tensorflow(args.device)
    with user_input():  # the encoder's weights file, the recordings
        encoder = audio_commands.load_speaker_encoder(args.encoder, args.framework, device)
        embeds = audio_commands.embed_wavs(encoder, wavs, progress(NAME, args.quiet))
    audio_commands.write_arrays(embeds, outputs)
    for p, e in zip(outputs, embeds):
        print(f"{p}: speaker embedding ({e.shape[0]} values, L2 norm {float(np.linalg.norm(e)):.3f})")
    return 0
