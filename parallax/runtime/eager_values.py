"""The values of a lifted step's variables (capture/function_step.py), between the user's eager variables and the
job's: a TF2 script's variables hold their values eagerly, and the lifted graph's start at zeros, so that no value
becomes a constant of the graph (a 100k-word embedding would be copied into every GraphDef the pipeline makes).

Loading runs each variable's initializer with the eager value fed, the idiom of `variable.load(value, session)`:
every worker writes its own, as the same synchronized step (server variables: the chief's write), and then every
replicated variable takes the chief's value, as after the runner's own initialization. So the job starts from the
chief's model, as a v1 job does, even where the workers' eager values differ (a script without a seed).
"""
import hashlib

import numpy as np


class EagerValues:
    def __init__(self, graph, lifted_variables):
        """`lifted_variables`: LiftedVariable (eager, graph) pairs of `graph`."""
        self._variables = list(lifted_variables)
        with graph.as_default():  # a v1 variable's initializer is read in its graph
            self._initializers = [(v.graph.initializer, v.graph.initial_value) for v in self._variables]
        self._synced = None  # digests of the values the eager variables held when last loaded or written back

    def load(self, runner, indices=None):
        """The eager variables' values (those at `indices`, or all) into the job."""
        indices = range(len(self._variables)) if indices is None else indices
        if self._synced is None:
            self._synced = [None] * len(self._variables)
        feeds = {}
        for i in indices:
            value = self._variables[i].eager.numpy()
            feeds[self._initializers[i][1]], self._synced[i] = value, _digest(value)
        if feeds:
            runner.run([self._initializers[i][0] for i in indices], feed_dict=feeds)
            runner.take_chief_values()

    def load_changed(self, runner):
        """The eager variables that Python code changed since they were last loaded or written back, into the
        job."""
        self.load(runner, [i for i, v in enumerate(self._variables) if _digest(v.eager.numpy()) != self._synced[i]])

    def write_back(self, runner):
        """The job's values into the eager variables."""
        values = runner.run([v.graph for v in self._variables])
        for i, (variable, value) in enumerate(zip(self._variables, values)):
            variable.eager.assign(value)
            self._synced[i] = _digest(value)


def _digest(value):
    """A value's digest: what tells a changed eager variable, without a second copy of the model."""
    array = np.ascontiguousarray(value)
    return array.dtype.str, array.shape, hashlib.blake2b(array.tobytes() if array.dtype != object else
                                                         repr(array.tolist()).encode(), digest_size=16).digest()
