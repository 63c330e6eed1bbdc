"""A script's own first run of its variables' initializers is already done.

`sess.run(tf1.global_variables_initializer())` is a line nearly every TF1 script has, and it stays when the session
becomes the runner. The runner initialized the variables when it started: the chief's values, or the latest
checkpoint, on every worker. Running the initializers again in a worker would draw new values in that worker alone
(an initializer without a seed): its replica would no longer be the others', and a server's variables would take
the last worker's draw, or lose the restored checkpoint. So the first run of an initializer of a global variable
or of a table (the runner ran those too) is skipped, and what else the fetched op groups runs: an iterator's
initializer, a local variable's (a metric's reset), as one device would; an initializer whose value is fed
(`variable.load`) assigns it, and runs. The runner's own initialization is one device's first run: a seeded
initializer draws the same values. A second run would draw again on one device, which every worker would have to
take from the chief: it is refused with UnsupportedError.

A group made after get_runner (`tf.group(tf1.local_variables_initializer(), iterator.initializer)` inline, as
scripts write it) is not in the rewritten graph, but the ops it groups are: it runs them.
"""
import sys

import tensorflow as tf

from parallax.errors import UnsupportedError

tf1 = tf.compat.v1


def done_at_start(graph):
    """The ops of the user's graph that the runner's own initialization did: the initializers of its global
    variables and of its tables."""
    ops = {v.initializer for v in graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES)
           if getattr(v, "initializer", None) is not None}
    return ops | {op for op in graph.get_collection(tf1.GraphKeys.TABLE_INITIALIZERS) if isinstance(op, tf.Operation)}


def split(op, done):
    """(the ops of `done` that running `op` runs, the ops it groups that are not of them). A group (a NoOp with
    control inputs only: tf.group, global_variables_initializer) is read through; any other op is itself."""
    if op in done:
        return [op], []
    if op.type == "NoOp" and not op.inputs and op.control_inputs:
        found, rest = [], []
        for grouped in op.control_inputs:
            f, r = split(grouped, done)
            found, rest = found + f, rest + r
        return found, rest
    return [], [op]


class ScriptGroups:
    """Replaces each fetched op that runs initializers done at start, or that groups ops and was made after the
    rewrite (not in `rewritten`), by None, and collects the other ops it groups."""

    def __init__(self, source_graph, rewritten, is_chief):
        self._done = done_at_start(source_graph) if source_graph is not None else set()
        self._graph, self._rewritten, self._is_chief, self._said = source_graph, rewritten, is_chief, set()
        self._stood_for = set()  # the initializers whose first run the runner's initialization was
        self._split = {}  # op -> split(op): read once, as a train op is fetched every step

    def read(self, fetches, feed_dict=None):
        """(the fetches with such ops as None, the other ops they group, to run with them). An initializer whose
        value is fed (`variable.load(value, session)`) assigns that value: it runs."""
        rest = []
        fed = {getattr(k, "name", k) for k in feed_dict or {}}

        def leaf(x):
            op = self._as_op(x)
            if op is None or any(t.name in fed or t.op.name in fed for t in op.inputs):
                return x
            if op not in self._split:
                self._split[op] = split(op, self._done)
            found, others = self._split[op]
            if not found:
                if others == [op] or self._in_rewritten(op):
                    return x
                rest.extend(others)  # a group made after the rewrite: its ops
                return None
            again = sorted(i.name for i in found if i in self._stood_for)
            if again:
                raise UnsupportedError(
                    f"{op.name} initializes again what was initialized in this job ({again[0]}): the runner's "
                    f"initialization at start stood for the first run, and initializing global variables or tables "
                    f"again during a job is not supported (every worker would have to take the chief's new draw); "
                    f"assign the values with an op, or start the job again")
            self._stood_for.update(found)
            rest.extend(others)
            self._say(op)
            return None
        return tf.nest.map_structure(leaf, fetches), rest

    def _as_op(self, x):
        if isinstance(x, str) and self._graph is not None and ":" not in x:
            try:
                x = self._graph.get_operation_by_name(x)
            except KeyError:
                return None
        return x if isinstance(x, tf.Operation) and x.graph is self._graph else None

    def _in_rewritten(self, op):
        try:
            self._rewritten.get_operation_by_name(op.name)
            return True
        except KeyError:
            return False

    def _say(self, op):
        if self._is_chief and op.name not in self._said:
            self._said.add(op.name)
            print(f"parallax: {op.name} initializes variables that the runner initialized when it started (the "
                  f"chief's values, or the latest checkpoint, on every worker); they are not initialized again",
                  file=sys.stderr, flush=True)
