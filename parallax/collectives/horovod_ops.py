"""Horovod's collectives. The raw ops, not hvd.allreduce: that one asks hvd.size() while building the graph, so a
rewrite could not be built (or tested) before hvd.init(). Collectives are named from variable names, so every
rank's collectives match whatever order they are submitted in."""


class HorovodCollectives:
    name = "horovod"

    def __init__(self, num_workers):
        from horovod.tensorflow import mpi_ops  # imported only by jobs that use Horovod
        self._hvd, self.num_workers = mpi_ops, num_workers
        self._created = []

    def allreduce_sum(self, tensor, name):
        return self._record(self._hvd._allreduce(tensor, op=self._hvd.Sum, name=name))

    def allgather(self, tensor, name):
        """Every worker's `tensor` (any first dimension), concatenated in rank order."""
        return self._record(self._hvd.allgather(tensor, name=name))

    def allgather_group(self, tensors, name):
        """[every worker's `t`, concatenated in rank order, for t in `tensors`]: one negotiation for the group."""
        if len(tensors) == 1:
            return [self.allgather(tensors[0], name)]
        gathered = self._hvd.grouped_allgather(list(tensors), name=name)
        self._created.extend(sorted({t.op.name for t in gathered}))
        return gathered

    def broadcast(self, tensor, name):
        """Worker 0's `tensor`, in every worker."""
        return self._record(self._hvd.broadcast(tensor, root_rank=0, name=name))

    def created(self):
        """The names of the collective ops made since the last call (every worker must run them together)."""
        names, self._created = self._created, []
        return names

    def _record(self, tensor):
        self._created.append(tensor.op.name)
        return tensor
