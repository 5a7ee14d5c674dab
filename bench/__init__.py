"""Benchmarks (``make bench``): ratios against baselines measured in the same run. Never part of ``make test``."""
