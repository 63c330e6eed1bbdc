"""Random examples of any dtype, as the probes feed them (batch_samples.py, statistic_laws.py, sparse_inputs.py):
valid ids of any table, words of a hash bucket or vocabulary, booleans, normal floats; and the two kinds a trial
may ask for instead (non-negative floats, rare zero ids)."""
import numpy as np
import tensorflow as tf


def nonnegative_values(rng, dtype, shape):
    """random_values, floats made non-negative (NONNEGATIVE_TRIAL)."""
    values = random_values(rng, dtype, shape)
    return np.abs(values) if dtype.is_floating else values


def rare_id_values(rng, dtype, shape):
    """random_values, integers 1 or 2 but for one 0 (RARE_ID_TRIAL)."""
    if not dtype.is_integer or dtype == tf.bool:
        return random_values(rng, dtype, shape)
    values = rng.randint(1, 3, size=shape).astype(dtype.as_numpy_dtype)
    if values.size:
        values.flat[rng.randint(values.size)] = 0
    return values


def random_values(rng, dtype, shape):
    """Random examples of `dtype`: small ints (valid ids of any table), words, booleans, or normal floats."""
    if dtype == tf.bool:
        return rng.rand(*shape) < 0.5
    if dtype == tf.string:  # words: a hash bucket's or a vocabulary's keys
        return rng.randint(0, 3, size=shape).astype(str).astype(object)
    if dtype.is_integer:
        return rng.randint(0, 3, size=shape).astype(dtype.as_numpy_dtype)
    return rng.randn(*shape).astype(dtype.as_numpy_dtype)
