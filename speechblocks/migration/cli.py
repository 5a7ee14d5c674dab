"""The text of ``speechblocks inspect`` (the command itself is in ``speechblocks/cli.py``)."""
from __future__ import annotations

from .schema import NOT_INFERABLE

__all__ = ["format_inventory"]


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


def format_inventory(inv) -> str:
    """The text ``speechblocks inspect`` prints for a :class:`~.inventory.CheckpointInventory`."""
    lines = [f"checkpoint: {inv.checkpoint}",
             f"model prefix: {inv.prefix or '(none: bare scopes)'}"]
    m = inv.model
    if m is None:
        lines.append("whole model: none (no inputs_embedding): the blocks migrate one by one")
    else:
        state = "complete" if m.complete else f"incomplete, {len(m.problems)} problem(s): migrates block by block"
        lines.append(f"whole model: Tacotron-2 ({state})")
        lines.append(f"  {m.describe()}")
        parts = m.parameters_by_part()
        lines.append("  parameters: " + ", ".join(f"{p} {n:,d}" for p, n in parts.items())
                     + f"; total {sum(parts.values()):,d}")
        lines += [f"      ! {p}" for p in m.problems]
    lines.append(f"recognised blocks: {len(inv.blocks)}")
    total = 0
    for b in inv.blocks:
        total += b.n_params
        lines.append(f"  {b.path:36s} {b.class_name:20s} {b.n_params:>10,d} params  {b.describe_config()}")
        if inv.use_ema:
            lines.append(f"  {'':36s} {'':20s} {'':>10s}         {b.ema_used} of {len(b.variables)} variables "
                         "from EMA shadows")
        if b.class_name == "CBHG" and b.config is not None:
            fix = "dense/kernel" in b.shapes
            lines.append(f"  {'':36s} {'':20s} {'':>10s}         dimension-fix dense: {'yes' if fix else 'no'} "
                         f"(projections[-1]={b.config['projections'][-1]}, highway_units={b.config['highway_units']})")
        lines += [f"      ! {p}" for p in b.problems]
    lines.append(f"  total {total:,d} parameters in recognised blocks")
    defaults = sorted({d for b in inv.blocks for d in NOT_INFERABLE.get(b.class_name, ())})
    if defaults:
        lines.append(f"  not in the shapes, so the seed's defaults: {', '.join(defaults)}")
    if any(b.path == "decoder/stop_token_projection" and b.config for b in inv.blocks):
        r = inv.block("decoder/stop_token_projection").config["shape"]
        lines.append(f"  outputs_per_step (from the stop projection): {r}")
    lines.append(f"unmigrated variables (not blocks of this library): {len(inv.unmigrated)}")
    lines += [f"  {n} {list(s)}" for n, s in inv.unmigrated]
    n_opt, opt_bytes = inv.optimizer_size()
    lines.append(f"optimizer state (skipped): {len(inv.optimizer)} variables, {n_opt:,d} values, "
                 f"{_human_bytes(opt_bytes)}")
    lines.append(f"ExponentialMovingAverage shadows: {len(inv.ema_shadows)}"
                 + (" (used: --use-ema)" if inv.use_ema else (" (ignored; pass --use-ema to use them)"
                                                              if inv.ema_shadows else "")))
    n_problems = len(inv.problems())
    lines.append("strict check: OK" if not n_problems else
                 f"strict check: {n_problems} problem(s) (migrate fails unless --no-strict)")
    return "\n".join(lines)
