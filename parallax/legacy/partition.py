"""The original Parallax's module name for partitioning: `parallax.partition.get_partitions(n)`."""
from parallax.capture.partitioner import get_partitioner, get_partitions  # noqa: F401
