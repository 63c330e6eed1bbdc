"""`parallax.get_partitioner`: split a large variable (an embedding) over the parameter servers."""
import os

import tensorflow as tf

from parallax.errors import ParallaxError
from parallax.launcher.protocol import ENV_NUM_SERVERS


def get_partitioner(min_partitions=1):
    """A `fixed_size_partitioner` into max(min_partitions, number of servers) shards along axis 0.

    The number of servers is one per host of the job's spec; the launcher tells each worker. In a process that
    was not launched by parallax (the launcher itself, or a single-process run), it counts as 1, so such a
    process uses `min_partitions`. Pick `min_partitions` >= the number of hosts to get the same variables
    everywhere.
    """
    if isinstance(min_partitions, bool) or not isinstance(min_partitions, int) or min_partitions < 1:
        raise ParallaxError(f"get_partitioner(min_partitions={min_partitions!r}): min_partitions must be an int >= 1")
    servers = int(os.environ.get(ENV_NUM_SERVERS, "1"))
    return tf.compat.v1.fixed_size_partitioner(max(min_partitions, servers))
