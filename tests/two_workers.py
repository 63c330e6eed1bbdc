"""Collectives for rewriting one worker's graph in a unit test: worker 0 of two, the other worker's value given."""
import tensorflow as tf


class TwoWorkers:
    """The collectives of worker 0 of two, the other worker's value being `other`."""
    def __init__(self, other):
        self.other, self._created = other, []

    def allgather(self, tensor, name):
        gathered = tf.concat([tensor, tf.constant([self.other], tensor.dtype)], 0, name=name)
        self._created.append(gathered.op.name)
        return gathered

    def created(self):
        names, self._created = self._created, []
        return names
