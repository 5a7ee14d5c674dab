"""``python -m speechblocks`` (and ``torchrun ... -m speechblocks train ...``): the command line."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
