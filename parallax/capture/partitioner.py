"""`parallax.get_partitioner`: split a large variable (an embedding) over the parameter servers."""
import json

import tensorflow as tf

from parallax.errors import ParallaxError
from parallax.process.protocol import ENV_NUM_SERVERS, ENV_PARTITIONS, this_process

COLLECTION = "parallax_partitioned"  # JSON {"shape", "parts"} of each variable get_partitioner split


def get_partitioner(min_partitions=1):
    """A `fixed_size_partitioner` into max(min_partitions, number of servers) shards along axis 0.

    The number of servers is one per host of the job's spec; the launcher tells each worker. In a process that
    was not launched by parallax (the launcher itself, or a single-process run), it counts as 1, so such a
    process uses `min_partitions`. Pick `min_partitions` >= the number of hosts to get the same variables
    everywhere. With run_option="AUTO" the job's plan chooses the number instead (the paper's partition search, by
    the cost model): the script is then run again with it, and so are the workers.
    """
    if isinstance(min_partitions, bool) or not isinstance(min_partitions, int) or min_partitions < 1:
        raise ParallaxError(f"get_partitioner(min_partitions={min_partitions!r}): min_partitions must be an int >= 1")
    environ = this_process().environ
    chosen = environ.get(ENV_PARTITIONS)  # run_option AUTO chose for this job (auto_plan.py)
    parts = int(chosen) if chosen else max(min_partitions, int(environ.get(ENV_NUM_SERVERS, "1")))
    split = tf.compat.v1.fixed_size_partitioner(parts)

    def partitioner(shape, dtype=None, **kwargs):
        tf.compat.v1.get_default_graph().add_to_collection(
            COLLECTION, json.dumps({"shape": [int(d) for d in shape], "parts": parts}))
        return split(shape, dtype=dtype, **kwargs)
    return partitioner


def get_partitions(num_partitions):
    """The original Parallax's `parallax.partition.get_partitions(n)`: how many shards a script that splits its own
    variables should make: `n`, or the number run_option="AUTO" chose for the job."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise ParallaxError(f"get_partitions({num_partitions!r}): the number of partitions must be an int >= 1")
    chosen = this_process().environ.get(ENV_PARTITIONS)
    return int(chosen) if chosen else num_partitions
