"""``speechblocks inspect``: the model and blocks a TF1 checkpoint holds, read in numpy (no framework)."""
from __future__ import annotations

from ..tf1_checkpoint_reader import ALLOW_NONFINITE_HELP
from ._common import precheck_checkpoint, user_input

NAME = "inspect"
HELP = "show the model and blocks a TF1 checkpoint holds"
DESCRIPTION = ("Lists the Tacotron-2 model a TF1 checkpoint holds (preset, r, speaker embedding, symbols, parameters "
               "per part), its blocks with their inferred configs, and what is skipped; for a Tacotron-1 checkpoint "
               "(keithito/tacotron, mimic2) its family, layout and the hparams its shapes give.")
EXAMPLES = """examples:
  speechblocks inspect synthesizer/saved_models/logs-pretrained/taco_pretrained
  speechblocks inspect model.ckpt-278000 --use-ema
  speechblocks inspect tacotron-20180906/model.ckpt --hparams keithito"""


def add_arguments(p) -> None:
    p.add_argument("checkpoint", help="checkpoint prefix, its .index file, or its directory")
    p.add_argument("--use-ema", action="store_true", help="report ExponentialMovingAverage shadows as the weights")
    p.add_argument("--allow-nonfinite", action="store_true", help=ALLOW_NONFINITE_HELP)
    p.add_argument("--hparams", metavar="PRESET", default=None,
                   help="check that the checkpoint is of this preset's family (rtvc, rayhane: Tacotron-2; keithito, "
                        "mimic2: Tacotron-1) and say whether its sizes are the preset's")


#: the parts a Tacotron-1 model's parameters are counted by: ``(part, name prefixes relative to model/inference/)``
TACOTRON1_PARTS = (
    ("embedding", ("embedding",)),
    ("encoder", ("prenet/", "encoder_cbhg/")),
    ("attention", ("memory_layer/",)),
    ("decoder", ("decoder/",)),
    ("post-CBHG (linear)", ("post_cbhg/", "dense/")),
)


def format_tacotron1(inv, preset: str | None = None) -> str:
    """The text ``speechblocks inspect`` prints for a Tacotron-1 checkpoint."""
    from ..tacotron1_hparams import resolve_tacotron1_hparams
    from ..tacotron1_schema import attention_cell_scopes

    t = inv.tacotron1
    hp = t.hparams
    attention = attention_cell_scopes(t.layout)["attention"] + "/"
    parts: dict[str, int] = {}
    for name, shape in t.shapes.items():
        n = 1
        for d in shape:
            n *= int(d)
        part = "attention" if name.startswith(attention) else next(
            (p for p, prefixes in TACOTRON1_PARTS if name.startswith(prefixes)), "other")
        parts[part] = parts.get(part, 0) + n
    matching = next((name for name in ("keithito", "mimic2")
                     if resolve_tacotron1_hparams(name, n_symbols=hp.n_symbols) == hp), None)
    sizes = (f"n_symbols={hp.n_symbols}, embed_depth={hp.embed_depth}, prenet_depths={list(hp.prenet_depths)}, "
             f"encoder_depth={hp.encoder_depth}, attention_depth={hp.attention_depth}, "
             f"decoder_depth={hp.decoder_depth}, postnet_depth={hp.postnet_depth}, num_mels={hp.num_mels}, "
             f"outputs_per_step={hp.outputs_per_step}, num_freq={hp.num_freq}, attention={hp.attention}")
    if hp.attention == "location_sensitive":
        sizes += f" ({hp.location_filters} filters x {hp.location_kernel_size})"
    lines = [f"checkpoint: {inv.checkpoint}", f"model prefix: {inv.prefix}", t.describe(),
             f"  hparams from the shapes (the rest: the {hp.variant} preset's): {sizes}",
             f"  preset: {matching or 'none (sizes differ from both presets)'}"
             + (f"; --hparams {preset}: {'sizes equal' if preset == matching else 'sizes differ'}" if preset else ""),
             "  parameters: " + ", ".join(f"{p} {n:,d}" for p, n in parts.items())
             + f"; total {sum(parts.values()):,d}"]
    if t.renamed:
        lines.append(f"  TF < 1.2 names: {len(t.renamed)} variables spelled weights/biases (read as kernel/bias)")
    lines.append("migration: the whole model (speechblocks migrate CKPT --to keras|torch OUT; Tacotron1.from_migrated)")
    lines.append(f"variables outside the model: {len(inv.unmigrated)}")
    lines += [f"  {n} {list(s)}" for n, s in inv.unmigrated]
    n_opt = sum(1 for _ in inv.optimizer)
    lines.append(f"optimizer state (skipped): {n_opt} variables")
    lines.append(f"ExponentialMovingAverage shadows: {len(inv.ema_shadows)}")
    return "\n".join(lines)


def run(args) -> int:
    from ..migration.cli import format_inventory
    from ..migration.inventory import inspect_checkpoint
    from ..tacotron1_schema import check_preset_family

    precheck_checkpoint(args.checkpoint)  # the checkpoint is read in numpy: no framework is loaded
    with user_input():
        inventory = inspect_checkpoint(args.checkpoint, use_ema=args.use_ema, allow_nonfinite=args.allow_nonfinite)
        if args.hparams is not None:
            check_preset_family(args.hparams, inventory.family, f"checkpoint {inventory.checkpoint!r}")
    if inventory.tacotron1 is not None:
        print(format_tacotron1(inventory, args.hparams))
    else:
        print(format_inventory(inventory))
    return 0
