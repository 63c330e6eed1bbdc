"""Values of the graph's own tensors on random batches and on parts of them, so that how a value of the whole batch
relates to its parts' (a sum, a mean, neither) is found by running what the user wrote, not from op types
(counts_by_values.py's counts, loss_law.py's losses).

The tensors' data ancestors are copied into a throw-away graph (control edges only among them), every per-worker
input (placeholders, iterators, queues: rows are examples) becomes a placeholder fed random examples (a sparse
input's three parts, one valid random sparse batch: sparse_inputs.py), every other placeholder without a default (a
setting the script feeds alike in every worker: a keep probability) one value per trial, the same in every part,
and the variables they read get their initial values. Floats are normal, but in NONNEGATIVE_TRIAL their absolute
values. Each trial feeds a batch of 2 * HALF examples and, for every input alike, each of PARTS: the whole batch,
its reversal, its halves, and its first example and the rest.
"""
import sys
import threading
import weakref

import numpy as np
import tensorflow as tf

from parallax.core import graph_utils
from parallax.analysis import sparse_inputs
from parallax.analysis.batch_shapes import PIN, copy_nodes, per_worker_inputs
from parallax.analysis.random_examples import nonnegative_values, rare_id_values, random_values

tf1 = tf.compat.v1
HALF = 4
TRIALS = 3
# The trial whose float inputs are non-negative, as masks, weights and event indicators are: a guard such as
# tf.maximum(tf.reduce_sum(mask), 1.0) holds its constant on most batches of random signs, which hides the law of
# the sum it guards (a loss divided by it taken for a sum of its parts: a Cox likelihood's, summed, twice one
# device's step). A law holds only if it holds on every trial.
NONNEGATIVE_TRIAL = 1
# The trial whose integer inputs hold one id exactly once in the whole batch (the others 1 or 2): a count per id is
# then 1 where a worker's is 1 or 0, as for a rare id, so a guard on it (tf.maximum(count, 1.0)) shows; of three
# small ids drawn at random, each is seldom alone.
RARE_ID_TRIAL = 2
WIDEN = 3  # positions of padding `widened` adds
MAX_BYTES = 256 << 20  # of variables to initialize again in the throw-away session
DECODED = 3  # ops whose outputs are fed instead of their inputs' random values, at most
TOO_LARGE = "of more than 256 MB, too large"
# Threads of its own: a run abandoned in a wait (below) keeps its thread, which must not be one of the process's
# shared pool (two, on 2 cores), or every later session of the process would wait too.
# Without Grappler: a probe runs each throw-away graph a few times only, so rewriting it first costs more than it
# saves; unrewritten, the graph computes what the user's ops say, as written.
_CPU_ONLY = tf1.ConfigProto(device_count={"GPU": 0}, use_per_session_threads=True)
_CPU_ONLY.graph_options.rewrite_options.disable_meta_optimizer = True
# Each run of a probe is bounded. TF's own timeout ends a wait it can cancel (a queue's); a StagingArea's get (a
# prefetch buffer the script's own op fills) does not heed it, so the run waits in a thread of its own, and a
# probe of the graph that outlives PROBE_LIMIT_S is abandoned there (its throw-away session with it), and every
# later probe of that graph is skipped: the checks it served are then said to be unchecked, and planning goes on.
PROBE_LIMIT_S = 60.0
_BOUNDED = tf1.RunOptions(timeout_in_ms=int(PROBE_LIMIT_S * 1000))
_BLOCKED = weakref.WeakKeyDictionary()  # graph -> the probe that outlived its limit


class ProbeTimeout(Exception):
    """A probe's run did not end within PROBE_LIMIT_S."""


def _closed(session):
    """Close the probe's session, unless a run of it was abandoned (ProbeTimeout): TF's close waits for that run,
    for ever, so the session is left to the thread that waits in it."""
    if not getattr(session, "_parallax_abandoned", False):
        session.close()


def _run(session, fetches, feed=None):
    """session.run(fetches, feed), bounded by PROBE_LIMIT_S (see above)."""
    outcome = {}

    def run():
        try:
            outcome["values"] = session.run(fetches, feed, options=_BOUNDED)
        except BaseException as e:  # noqa: B902  handed to the caller's thread
            outcome["error"] = e
    waiter = threading.Thread(target=run, name="parallax-probe", daemon=True)
    waiter.start()
    waiter.join(PROBE_LIMIT_S)
    if waiter.is_alive():
        session._parallax_abandoned = True
        raise ProbeTimeout(f"a probe of the graph on random batches did not end within {PROBE_LIMIT_S:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["values"]
# The whole batch, its reversal, and two splits of it: its halves, and its first example and the rest. A count is
# the sum of any two parts'; a longest example's length seldom is for both splits.
PARTS = (lambda v: v, lambda v: v[::-1], lambda v: v[:HALF], lambda v: v[HALF:], lambda v: v[:1], lambda v: v[1:])
WHOLE_AND_SPLITS = (PARTS[0], PARTS[2], PARTS[3], PARTS[4], PARTS[5])
FIRST_SHARES = (0.5, 1 / (2 * HALF))  # of each split, its first part's share of the whole batch's examples


class _Undecodable(Exception):
    """An op failed on the random words of a string input it reads (a parse of serialized examples)."""

    def __init__(self, op_name):
        super().__init__(op_name)
        self.op_name = op_name


def sampled(graph, tensors, parts=PARTS, trials=TRIALS, shapes=False, held=None, widened=None, edit=None,
            pooled=None):
    """{tensor name: [its values (float64 arrays) on each of `parts`, per trial]}, or with `shapes` its shapes
    (int64 arrays); {} when that cannot be run; None when the variables it needs hold more than MAX_BYTES.
    `held` ({tensor name: f(value, examples)}) makes every part after the whole batch (parts[0]) read each of those
    tensors as f of its value on the whole batch and of the part's examples (their positions in it): what the
    rewrite makes a worker read. A statistic of the batch as combined, each of two workers reading one device's
    mean, or half its sum (batch_statistics.py, statistic_as_combined); a random draw as split, each example's
    values of one device's draw (batch_draws.py, draw_as_split). `widened` ({input name: (axes, value)}) pads those
    inputs' random examples with WIDEN more positions of `value` along `axes` (padded_inputs.py). `edit(graph)`
    changes the throw-away graph once it is imported and returns more tensors to hold, {tensor: f} (a mean
    loss's seed, or a mean term's gradient, scaled by each part's share: loss_seeds.shares_as_held). `pooled`
    ({tensor name: f(first's value, second's value)}) makes each part of a split (the parts after the whole come in
    pairs, as in WHOLE_AND_SPLITS) read each of those tensors as f of both parts' own values: what a worker reads
    of a value the rewrite combines over the workers in the backward pass (the gradient flowing into a statistic
    computed from variables, batch_statistics.py).

    Where an op fails on the random words of a string input it reads (a parse of serialized examples), its outputs
    whose rows are examples are fed random examples instead, as inputs of their own (its sparse outputs are sparse
    inputs already), and the graph is run again: up to DECODED such ops."""
    decoded = set()
    while len(decoded) <= DECODED and graph not in _BLOCKED:
        try:
            return _sampled(graph, tensors, parts, trials, shapes, held, widened, edit, decoded, pooled)
        except _Undecodable as e:
            decoded.add(e.op_name)
        except ProbeTimeout as e:
            _BLOCKED[graph] = e
            print(f"parallax: warning: planning: {e}, as when the graph waits on a buffer the script itself fills "
                  f"(a StagingArea's get); the checks on random batches are skipped", file=sys.stderr, flush=True)
    return {}


def _decoded_inputs(graph, decoded, fed):
    """The outputs of the ops in `decoded` whose rows are examples, but those fed already."""
    return [t for name in sorted(decoded) for t in graph.get_operation_by_name(name).outputs
            if t.name not in fed and t.shape.rank is not None and t.shape.rank >= 1 and
            tf.compat.dimension_value(t.shape[0]) is None and t.dtype not in (tf.resource, tf.variant)]


def _small_initializers(graph, tensors):
    """The initializers a throw-away run of `tensors` needs, or None when their variables are too big to copy."""
    variables = {v.op.name: v for v in graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES) +
                 graph.get_collection(tf1.GraphKeys.LOCAL_VARIABLES)}
    needed = graph_utils.ancestors([t.op for t in tensors], False)
    read = [variables[op.name] for op in needed if op.name in variables]
    if sum((v.shape.num_elements() or MAX_BYTES) * v.dtype.base_dtype.size for v in read) > MAX_BYTES:
        return None
    # the variables' initializers, and those of the lookup tables the tensors read (a vocabulary's)
    return [v.initializer for v in read] + [
        op for op in graph.get_collection(tf1.GraphKeys.TABLE_INITIALIZERS) if op.inputs and op.inputs[0].op in needed]


def _trial_feeds(trial, feeds, inputs, sparse, settings, parts, widened):
    """One trial's feed of each part: random inputs of the trial's kind; the settings the same in every part."""
    rng = np.random.RandomState(trial)
    values_of = {NONNEGATIVE_TRIAL: nonnegative_values, RARE_ID_TRIAL: rare_id_values}.get(trial, random_values)
    batch = {feeds[t.name]: _widened(_random(rng, t, values_of), *(widened or {}).get(t.name, ((), None)))
             for t in inputs}
    sparse_batch = [(s, sparse_inputs.random_batch(rng, s, 2 * HALF, values_of)) for s in sparse]
    fixed = {feeds[t.name]: _setting(rng, t) for t in settings}
    examples = np.arange(2 * HALF)
    return [{**_part_feed(feeds, batch, sparse_batch, part, examples), **fixed} for part in parts]


def _in_run(run, by_name, names):
    """`by_name` ({tensor name: value}) keyed by the throw-away graph's tensors, for those it imported."""
    return {run.get_tensor_by_name(n): f for n, f in (by_name or {}).items() if n.rsplit(":", 1)[0] in names}


def _failed_run(error, feeds, decoded):
    """An InvalidArgumentError of a sampling run: an undecodable fed record is raised; anything else skips."""
    failed = getattr(error, "op", None)
    # Random numbers are valid examples by construction (small ids, normal floats); random words are no
    # serialized record, so only an op that fails on a fed string input decodes it.
    fed = {p.name for p in feeds.values() if p.dtype == tf.string}
    if failed is not None and failed.name not in decoded and any(i.name in fed for i in failed.inputs):
        raise _Undecodable(failed.name) from error
    return {}


def _sampled(graph, tensors, parts, trials, shapes, held, widened, edit, decoded, pooled):
    initializers = _small_initializers(graph, tensors)
    if initializers is None:
        return None
    feeds = {}  # an input's name: the placeholder that feeds it in the throw-away graph
    try:
        # A constant in a v1 while loop's body is in the loop's frame through a control edge from its pivot.
        subgraph = copy_nodes(graph.as_graph_def(), {op.name for op in graph_utils.ancestors(
            [t.op for t in tensors] + initializers, False)}, control=True)
        _seed_unseeded(subgraph)
        names = {n.name for n in subgraph.node}
        sparse = [s for s in sparse_inputs.sparse_inputs_of(graph) if any(t.op.name in names for t in s.tensors)]
        fed_sparse = {t.name for s in sparse for t in s.tensors}
        inputs = [t for t in per_worker_inputs(graph) if t.op.name in names and t.name not in fed_sparse]
        inputs += _decoded_inputs(graph, decoded, fed_sparse | {t.name for t in inputs})
        settings = _settings(graph, names, fed_sparse | {t.name for t in inputs})
        # On the CPU, and each run bounded: a blocking op of the user's (a queue outside the inputs) ends the check.
        with tf.Graph().as_default() as run:
            session = tf1.Session(graph=run, config=_CPU_ONLY)  # not `with`: see _closed
            try:
                feeds = {t.name: tf1.placeholder(t.dtype, [None] + t.shape.as_list()[1:])
                         for t in inputs + [t for s in sparse for t in s.tensors if t.op.name in names]}
                feeds.update({t.name: tf1.placeholder(t.dtype, t.shape) for t in settings})
                tf1.import_graph_def(subgraph, input_map=feeds, name="")
                edited = edit(run) if edit is not None else {}
                _run(session, [run.get_operation_by_name(op.name) for op in initializers])
                # an input's readers read its feed; its own node, imported beside it, is never fed
                fetches = [feeds[t.name] if t.name in feeds else run.get_tensor_by_name(t.name) for t in tensors]
                fetches = [tf.shape(t, out_type=tf.int64) for t in fetches] if shapes else fetches
                samples = {t.name: [] for t in tensors}
                examples = np.arange(2 * HALF)
                for trial in range(trials):
                    values = _run_parts(session, fetches,
                                        _trial_feeds(trial, feeds, inputs, sparse, settings, parts, widened),
                                        [part(examples) for part in parts],
                                        {**_in_run(run, held, names), **edited}, _in_run(run, pooled, names))
                    for i, t in enumerate(tensors):
                        samples[t.name].append(tuple(np.asarray(v[i], np.int64 if shapes else np.float64)
                                                     for v in values))
                return samples
            finally:
                _closed(session)
    except tf.errors.InvalidArgumentError as e:
        return _failed_run(e, feeds, decoded)
    except ProbeTimeout:
        raise
    except Exception:  # noqa: BLE001  a check that cannot run the user's graph so is skipped, never the job
        return {}


def is_sum_of_parts(parts, rtol=1e-05, atol=1e-08):
    """Whether a value on the whole batch (parts[0], then the other PARTS in order) is its reversal's and the sum of
    each split's two parts' (a count, a summed loss)."""
    whole, reversed_, *splits = parts
    return np.allclose(whole, reversed_, rtol, atol) and all(np.allclose(whole, first + second, rtol, atol)
                                                             for first, second in zip(splits[::2], splits[1::2]))


def is_mean_of_parts(parts, rtol=1e-05, atol=1e-08):
    """Whether a value on the whole batch (parts[0], then the other PARTS in order) is its reversal's and each
    split's two parts' mean, weighted by their examples (a mean loss)."""
    whole, reversed_, *splits = parts
    return np.allclose(whole, reversed_, rtol, atol) and all(
        np.allclose(whole, share * first + (1 - share) * second, rtol, atol)
        for first, second, share in zip(splits[::2], splits[1::2], FIRST_SHARES))


def _widened(value, axes, padding):
    return np.pad(value, [(0, WIDEN if d in axes else 0) for d in range(value.ndim)], constant_values=padding) \
        if axes else value


def _run_parts(session, fetches, feeds_of_parts, orders, held, pooled=None):
    """The fetches' values on each part; after the first, a part reads each `held` tensor as f(its value on the
    first part, the part's examples), and each part of a pair (the parts after the first) each `pooled` tensor as
    f(the first's own value, the second's)."""
    held = sorted(held.items(), key=lambda item: item[0].name)
    pooled = sorted((pooled or {}).items(), key=lambda item: item[0].name)
    whole = None
    values, own = [], []
    for feed, order in zip(feeds_of_parts, orders):
        if whole is not None:
            feed = dict(feed, **{t.name: np.asarray(f(v, order)).astype(v.dtype) for (t, f), v in zip(held, whole)})
        out = _run(session, fetches + [t for t, _ in held] + [t for t, _ in pooled], feed)
        values.append(out[:len(fetches)])
        own.append((feed, out[len(fetches) + len(held):]))
        whole = out[len(fetches):len(fetches) + len(held)] if whole is None else whole
    for first in range(1, len(values) - 1, 2) if pooled else ():
        (feed_a, own_a), (feed_b, own_b) = own[first], own[first + 1]
        both = {t.name: np.asarray(f(a, b)).astype(a.dtype) for (t, f), a, b in zip(pooled, own_a, own_b)}
        for k, feed in ((first, feed_a), (first + 1, feed_b)):
            values[k] = _run(session, fetches, dict(feed, **both))
    return values


def statistic_as_combined(law_is_sum):
    """What a part reads of a statistic the rewrite combines: one device's value; for a sum, a worker of two in a
    split reads half of it (the workers' mean)."""
    return lambda value, examples: value / 2 if law_is_sum and len(examples) < 2 * HALF else value


def same_in_every_part(value, examples):
    """What a part reads of a value the examples do not change (a sampler's draw): the whole batch's."""
    return value


def draw_as_split(axis):
    """What a part reads of a random draw the rewrite splits: its examples' values of the whole batch's draw."""
    return lambda value, examples: np.take(value, examples, axis=axis)


def merged_as_split(axis, time_major=False):
    """What a part reads of an output along a merged axis (the batch merged with k steps of each example): its
    examples' rows, each example's k rows together (example-major, as a reshape of a batch-major [b, T] lays them),
    or with `time_major` the examples' row in each of the k blocks ([T, b] reshaped). Under the wrong layout the
    parts do not add up to the whole, so no law read from them holds, and a loss is averaged as when it cannot be
    checked. The value is the whole batch's, of 2 * HALF examples."""
    def take(value, examples):
        k, examples = value.shape[axis] // (2 * HALF), np.asarray(examples)
        rows = (np.arange(k)[:, None] * 2 * HALF + examples) if time_major else (examples[:, None] * k + np.arange(k))
        return np.take(value, rows.ravel(), axis=axis)
    take.merged = True
    return take


def _part_feed(feeds, batch, sparse_batch, part, examples):
    """The feed of one part of the batch: `part` of each dense input's rows, and of each sparse input's examples."""
    feed = {p: part(v) for p, v in batch.items()}
    for s, whole in sparse_batch:
        for t, value in zip(s.tensors, sparse_inputs.part(whole, part(examples))):
            if t.name in feeds:
                feed[feeds[t.name]] = value
    return feed


def _settings(graph, names, fed):
    """The placeholders among `names` that are no input (no rows of examples: a scalar, of unknown rank, or marked
    by parallax.shared_input) and have no default: settings the script feeds alike in every worker (a keep
    probability, a learning rate, a training flag, a pool of candidates), which the graph cannot run without."""
    return [op.outputs[0] for op in graph.get_operations() if op.type == "Placeholder" and op.name in names and
            op.outputs[0].name not in fed]


def _setting(rng, t):
    """A value for the setting `t`, one per trial: True, 1, a word, or a float in [0.5, 1) (a keep probability,
    a learning rate, a scale), of its static shape (a scalar where the rank is unknown; where a size is, as many as
    a batch's examples, so that small random ids index it: a shared pool of candidates, shared_inputs.py)."""
    shape = [] if t.shape.rank is None else [2 * HALF if d is None else d for d in t.shape.as_list()]
    if t.dtype == tf.bool:
        return np.ones(shape, bool)
    if t.dtype == tf.string:
        return np.full(shape, "0", object)
    if t.dtype.is_integer:
        return np.ones(shape, t.dtype.as_numpy_dtype)
    return rng.uniform(0.5, 1.0, size=shape).astype(t.dtype.as_numpy_dtype)


def _seed_unseeded(graph_def):
    """Give every op left to a random seed (an initializer's draw in a graph without a seed) a fixed one, so that
    what is found is the same in every run."""
    for i, node in enumerate(graph_def.node):
        if "seed" in node.attr and "seed2" in node.attr and not node.attr["seed"].i and not node.attr["seed2"].i:
            node.attr["seed"].i, node.attr["seed2"].i = 1, i + 1


def _random(rng, t, values_of):
    return values_of(rng, t.dtype, [2 * HALF] + [PIN if d is None else d for d in t.shape.as_list()[1:]])


def with_extents_from_runs(graph, tensors, probes, markers):
    """The marker probes' shapes (one {tensor name: shape} per marker, batch_shapes.probed_shapes) with what shape
    inference left unknown found by running the graph on random batches and their parts: a dimension that holds
    each part's number of examples is the batch's (the marker), one that is the same in every part is that extent.
    Shape inference cannot see the batch through a value: a sparse input's dense shape, the segments of
    embedding_lookup_sparse. Probes that are empty (the graph could not be imported so) are returned as they are."""
    if not all(probes):
        return probes
    unknown = [t for t in tensors if any(p.get(t.name, ()) is None or None in p.get(t.name, ()) for p in probes)]
    runs = sampled(graph, unknown, shapes=True) if unknown else {}
    if not runs:
        return probes
    examples = [len(part(np.arange(2 * HALF))) for part in PARTS]
    filled = [dict(p) for p in probes]
    for t in unknown:
        shapes = [s for trial in runs[t.name] for s in trial]
        if len({len(s) for s in shapes}) != 1:
            continue
        for p, marker in zip(filled, markers):
            static = p[t.name] or (None,) * len(shapes[0])
            p[t.name] = tuple(d if d is not None else _extent([int(s[k]) for s in shapes], examples * TRIALS, marker)
                              for k, d in enumerate(static))
    return filled


def _extent(seen, examples, marker):
    """The marker for a dimension that holds each part's number of examples; k times it for one that holds k rows
    of each example (the batch merged with another axis: a reshape of [b, k, ...] to [b*k, ...]); the extent that
    is the same in every part; else None."""
    if seen == examples:
        return marker
    if all(e and s % e == 0 for s, e in zip(seen, examples)):
        rows = {s // e for s, e in zip(seen, examples)}
        if len(rows) == 1 and min(rows) > 1:
            return min(rows) * marker
    return seen[0] if len(set(seen)) == 1 else None
