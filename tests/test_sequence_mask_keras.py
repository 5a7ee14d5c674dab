import numpy as np
import pytest
import tensorflow as tf

from tf_layers import sequence_mask


def test_hand_derived_mask_rounds_max_length_up_to_multiple_of_r():
    expect = np.array([[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]], np.float32)
    got = sequence_mask([1, 3, 2], 2, expand=False)
    assert got.dtype == tf.float32
    np.testing.assert_array_equal(np.asarray(got), expect)
    got3 = sequence_mask(np.array([1, 3, 2], np.int64), 3)  # 3 is already a multiple of 3
    assert tuple(got3.shape) == (3, 3, 1)
    np.testing.assert_array_equal(np.asarray(got3)[:, :, 0], expect[:, :3])
    assert tuple(sequence_mask([1, 1], 3).shape) == (2, 3, 1)  # longest 1 -> 3 frames
    assert tuple(sequence_mask([4], 5, expand=False).shape) == (1, 5)
    assert tuple(sequence_mask(np.zeros(2, np.int32), 2, expand=False).shape) == (2, 0)
    assert sequence_mask([2], 1, dtype="bool").dtype == tf.bool


def test_tf_function_unknown_batch_one_trace():
    fn = tf.function(lambda lengths: sequence_mask(lengths, 3, expand=False),
                     input_signature=[tf.TensorSpec([None], tf.int32)])
    for lengths in ([1, 3, 2], [7], [0, 4, 5, 6]):
        want = (np.arange(-(-max(lengths) // 3) * 3)[None] < np.array(lengths)[:, None]).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(fn(tf.constant(lengths))), want)
    assert len(fn._list_all_concrete_functions()) == 1  # noqa: SLF001  (no retracing for new shapes)


@pytest.mark.parametrize("args,fragment", [
    (([1, 2], 0), "`r`"),
    (([1, 2], 1.5), "`r`"),
    (([1, -2], 2), "`lengths`"),
    ((np.array([1.0, 2.0]), 2), "`lengths`"),
    ((np.ones((2, 2), np.int32), 2), "(batch,)"),
])
def test_bad_input_value_error_names_argument(args, fragment):
    with pytest.raises(ValueError, match="sequence_mask") as err:
        sequence_mask(*args)
    assert fragment in str(err.value)


def test_negative_length_inside_tf_function_is_a_debugging_assertion():
    fn = tf.function(lambda lengths: sequence_mask(lengths, 2), input_signature=[tf.TensorSpec([None], tf.int32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="`lengths` must hold lengths >= 0"):
        fn(tf.constant([3, -1]))


# the export whatever the import order (`import tf_layers.sequence_mask` first): tests/test_import_isolation.py
