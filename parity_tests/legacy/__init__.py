"""The TF1 legacy reference: TF1-style graph code run in a subprocess with ``TF_USE_LEGACY_KERAS=1``.

Nothing here is imported by the main process except through :mod:`parity_tests.reference`, which only
starts the subprocess.
"""
