"""Stage 1, capture: what parallax records while the user's script builds its graph: every (variable, raw
gradient) pair (gradients, tape, tf_hook), the dataset marked by `parallax.shard` (shard, shard_placement), and
the variables split by `get_partitioner` (partitioner)."""
