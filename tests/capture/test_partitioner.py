import pytest
import tensorflow as tf

import parallax
from parallax.process.role import ENV_NUM_SERVERS


def _partitions(partitioner):
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable("emb", [12, 3], partitioner=partitioner)
    return len(list(v))


def test_at_least_min_partitions_and_at_least_one_per_server(monkeypatch):
    monkeypatch.delenv(ENV_NUM_SERVERS, raising=False)
    assert _partitions(parallax.get_partitioner(3)) == 3  # not launched by parallax: one server
    monkeypatch.setenv(ENV_NUM_SERVERS, "4")
    assert _partitions(parallax.get_partitioner(2)) == 4
    assert _partitions(parallax.get_partitioner(5)) == 5


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_min_partitions(bad):
    with pytest.raises(parallax.ParallaxError, match="min_partitions must be an int >= 1"):
        parallax.get_partitioner(bad)
