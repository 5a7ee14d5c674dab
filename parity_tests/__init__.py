"""Cross-framework parity suite: TF1 legacy reference, Keras 3 and PyTorch, block by block."""
