"""Training data path and schedule of the original Tacotron-2 (DESIGN §10).

The learning-rate decay, the feeder's batches (padding, stop-token targets), its test split, its
length-sorted shuffled batch groups and a resumable sampler. Numpy only: the Keras and torch feeders
(``tf_layers.tacotron2_feeder``, ``torch_layers.tacotron2_feeder``) are built on these functions.
"""
from .batches import pad_batch, prepare_batch, round_up, shard_rows, target_pad_value
from .examples import check_example_files, load_example, uses_linear_targets
from .guided_attention import add_guided_attention_weights, guided_attention_weights
from .metadata import (
    BATCHES_PER_GROUP,
    BatchSampler,
    MetadataEntry,
    batch_groups,
    make_test_batches,
    metadata_split,
    read_metadata,
    split_train_test,
)
from .noise import draw_noise_masks, noise_mask_rows
from .schedule import learning_rate

__all__ = ["BATCHES_PER_GROUP", "BatchSampler", "MetadataEntry", "add_guided_attention_weights", "batch_groups",
           "check_example_files", "draw_noise_masks", "guided_attention_weights", "learning_rate", "load_example",
           "make_test_batches", "metadata_split",
           "noise_mask_rows", "pad_batch", "prepare_batch", "read_metadata", "round_up", "shard_rows",
           "split_train_test", "target_pad_value", "uses_linear_targets"]
