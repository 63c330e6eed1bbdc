"""The user's names for what a Runner runs: a fetch or feed key of the user's graph (a tensor, op, variable,
IndexedSlices, SparseTensor, or a name) and its element in the rewritten graph, which keeps the user's names."""
import tensorflow as tf

from parallax.errors import FetchNotFoundError, NoTrainOpError


def fetch_key(leaves):
    """A cache key for a fetch set (its mapped leaves): the same in every worker that fetches the same elements."""
    return tuple(getattr(x, "name", None) or str(id(x)) for x in leaves)


class FetchNames:
    def __init__(self, source_graph, rewritten_graph, variables):
        self._source = source_graph
        self._graph = rewritten_graph
        self._variables = variables  # op name -> the rewritten graph's value of that variable

    def fetch(self, x):
        if isinstance(x, tf.IndexedSlices):
            return tf.IndexedSlices(*(None if t is None else self.fetch(t)
                                      for t in (x.values, x.indices, x.dense_shape)))
        if isinstance(x, tf.SparseTensor):
            return tf.SparseTensor(*(self.fetch(t) for t in (x.indices, x.values, x.dense_shape)))
        if isinstance(x, tf.Variable):
            self._check_graph(x.op)
            if x.op.name in self._variables:
                return self._variables[x.op.name]
            return self.lookup(x.name)
        if isinstance(x, (tf.Tensor, tf.Operation)):
            self._check_graph(x)
            return self.lookup(x.name)
        if isinstance(x, str):
            return self.lookup(x)
        raise FetchNotFoundError(f"cannot fetch {x!r} ({type(x).__name__}); fetch a tensor, op or variable of the "
                                 f"graph passed to get_runner, or its name")

    def feed_key(self, key):
        mapped = self.fetch(key)
        if isinstance(mapped, tf.Operation):
            if len(mapped.outputs) != 1:
                raise FetchNotFoundError(f"feed key {key!r} is an op with {len(mapped.outputs)} outputs; "
                                         f"feed a tensor such as '{mapped.name}:0'")
            return mapped.outputs[0]
        return mapped

    def _check_graph(self, element):
        if element.graph is not self._source and element.graph is not self._graph:
            raise FetchNotFoundError(f"{element.name!r} belongs to another graph than the one passed to "
                                     f"get_runner; fetch elements of that graph")

    def lookup(self, name):
        try:
            element = self._graph.as_graph_element(name, allow_tensor=True, allow_operation=True)
            if isinstance(element, tf.Tensor) and element.dtype == tf.resource and element.op.name in self._variables:
                return self._variables[element.op.name]  # a resource variable by name: its value, not its handle
            return element
        except (KeyError, ValueError) as e:
            hint = ""
            if self._source is not None:
                try:
                    self._source.as_graph_element(name, allow_tensor=True, allow_operation=True)
                    hint = " It was added to the graph after get_runner(); build the whole graph first."
                except (KeyError, ValueError):
                    pass
            raise FetchNotFoundError(f"{name!r} is not in the graph passed to get_runner ({e}).{hint}") from None


def refuse_none(fetches):
    """A None among the user's fetches, which TF's Session refuses too, and which would otherwise run nothing in its
    place: the training op of the new Keras optimizers in a v1 graph is None, and a job fetching it trains nothing."""
    nones = [i for i, leaf in enumerate(tf.nest.flatten(fetches)) if leaf is None]
    if nones:
        raise NoTrainOpError(
            f"runner.run was given None to fetch, at [{nones[0]}] of its fetches' leaves (TF's Session.run refuses "
            f"None too). A training "
            f"op that is None is what the new Keras optimizers' minimize and apply_gradients return in a v1 graph "
            f"(tf.keras.optimizers.Adam and the others, TF >= 2.11): there they apply nothing. In a v1 graph use "
            f"tf.compat.v1.train.AdamOptimizer (or tf.keras.optimizers.legacy.Adam); or write the training step "
            f"as a tf.function and pass it to get_runner")
