"""``speechblocks doctor``: what this installation can do (``speechblocks.diagnostics``), as text or JSON."""
from __future__ import annotations

import json

NAME = "doctor"
HELP = "report what this installation can do (frameworks, native kernels, assets)"
DESCRIPTION = ("Reports the versions and abilities this installation has (the frameworks, the native kernels, the "
               "optional extras, the assets make install fetched), as speechblocks.diagnostics finds them. Exit "
               "status 0: the report is the answer, whatever it says.")
EXAMPLES = """examples:
  speechblocks doctor
  speechblocks doctor --json > doctor.json"""


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")


def run(args) -> int:
    from ..diagnostics import format_report, report  # imported here: what it probes loads only for this command

    found = report()
    print(json.dumps(found, indent=2) if args.json else format_report(found))
    return 0
