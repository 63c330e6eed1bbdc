"""`parallax.shard(ds)`: each worker reads its own slice of the input."""
import tensorflow as tf

from parallax.errors import ParallaxError
from parallax.launcher.protocol import current_role


def shard(ds):
    """`ds.shard(num_workers, worker_id)` for this worker; the dataset itself when there is one worker.

    Shard element-wise *before* batching: the union of the workers' k-th batches of size b is then exactly the
    single process's k-th batch of size N*b, which is what makes distributed training equivalent.
    """
    if not isinstance(ds, tf.data.Dataset):
        raise ParallaxError(f"parallax.shard() takes a tf.data.Dataset, not {type(ds).__name__}")
    role = current_role()
    if role.num_workers == 1:
        return ds
    with tf.name_scope("parallax_shard"):
        return ds.shard(role.num_workers, role.worker_id)
