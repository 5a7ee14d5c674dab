"""``speechblocks mel``: a recording's mel (or linear) spectrogram, as the original preprocessing made it."""
from __future__ import annotations

import os

from .. import audio_commands, synthesis
from ._common import progress, user_input
from ._options import existing_file, hparams_options, overrides

NAME = "mel"
HELP = "a recording's mel (or linear) spectrogram, as the original preprocessing made it"
DESCRIPTION = ("Loads each recording (resampled to the preset's sample_rate), applies the preset's preprocessing "
               "order (rescale, silence trimming, pre-emphasis) and writes its spectrogram [frames, num_mels] as "
               ".npy: the features the model was trained on.")
EXAMPLES = """examples:
  speechblocks mel recording.wav --hparams rtvc --out recording.npy
  speechblocks mel wavs/*.wav --hparams rayhane --set trim_silence=false --out mels/"""


def add_arguments(p) -> None:
    p.add_argument("wav", nargs="+", type=existing_file(), help="audio files (wav, flac, ogg)")
    hparams_options(p, "the audio hparams")
    p.add_argument("--linear", action="store_true", help="the linear spectrogram [frames, num_freq] instead")
    p.add_argument("--out", required=True, help="one file: the .npy; several: a directory of <name>.npy")
    p.add_argument("--quiet", action="store_true", help="no progress line on a terminal")


def run(args) -> int:
    from .. import audio

    with user_input():  # the preset and the audio --set values
        hp = audio_commands.audio_hparams_for(args.hparams, overrides(args.set))
    stems = [os.path.splitext(os.path.basename(p))[0] for p in args.wav]
    outputs = synthesis.output_files(args.out, stems)
    key = "linear" if args.linear else "mel"
    tell = progress(NAME, args.quiet)
    feats = []
    for i, p in enumerate(args.wav):
        if tell:
            tell(f"{i + 1}/{len(args.wav)}: {os.path.basename(p)}")
        with user_input():  # the recording: unreadable, empty, silent
            feats.append(audio.recording_features(p, hp)[key])
    audio_commands.write_arrays(feats, outputs)
    for p, f in zip(outputs, feats):
        print(f"{p}: {f.shape[0]} frames x {f.shape[1]} {'linear bins' if args.linear else 'mels'}")
    return 0
