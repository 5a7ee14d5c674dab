"""``python -m speechblocks`` (and ``torchrun ... -m speechblocks train ...``): the command line."""
from .cli import main

raise SystemExit(main())
