"""Config(check_steps=K): a check users run on their own script. The job's first K training steps are
computed again as one device computes them (one_device_replay.py), on the concatenation of the workers' actual
batches, from the job's starting state, and every variable is compared.

Each worker keeps, for each checked step, what it fed (the user's feed_dict) and what its inputs yielded (the
outputs of the iterators and queues the step read, fetched with the step), and whether its input ended there. After
the K-th step (or at close, when the job stopped sooner) the workers hand their record to the chief: through a queue
on the chief's TF server when the job has servers, else through Horovod's allgather. The chief replays and compares.

The rule it checks is the promise itself, so it needs no knowledge of why a job could differ: a rule that missed a
graph, a planted error, a mistake in the data (every worker reading the same batch, which it names). Its limits:
it replays training steps only (a run between them that writes variables, other than an iterator's restart, is
not replayed); a graph whose batch size is fixed in it (a reshape to [b, ...]) cannot take the global batch, and
the check says so; stateful random ops are compared as one device draws them from the step the check starts.
"""
import pickle
import sys

import numpy as np
import tensorflow as tf

from parallax.core import graph_utils
from parallax.runtime import one_device_replay
from parallax.analysis import sparse_inputs
from parallax.analysis.batch_shapes import per_worker_inputs
from parallax.errors import CheckError

tf1 = tf.compat.v1
GATHER_TIMEOUT_MS = 600_000  # the chief waits this long for the other workers' records


def tolerance(dtype, magnitude):
    """How far a value may be from one device's: the order of summation differs between a job and one device."""
    if np.issubdtype(dtype, np.floating):
        eps = np.finfo(dtype).eps
        return 64 * eps * max(1.0, magnitude) + (1e-5 * max(1.0, magnitude) if dtype != np.float64 else 1e-9)
    return 0


class StepCheck:
    """One worker's part of the check. `variables`: {source variable op name: this worker's tensor of its value}."""

    def __init__(self, source, variables, steps, fails, worker_id, num_workers, gather,
                 layout=one_device_replay.BLOCKS):
        self._source = source
        self._variables = {name: t for name, t in variables.items() if _is_variable(source, name)}
        self.steps, self._fails = steps, fails
        self._worker_id, self._num_workers = worker_id, num_workers
        self._gather = gather  # bytes -> [every worker's bytes] on the chief, None elsewhere
        self._layout = layout  # plan.batch_layout: how the workers' examples of what the graph reads make one batch
        self._batch = {t.name for t in per_worker_inputs(source)}
        self._sparse = sparse_inputs.sparse_inputs_of(source)
        # What a step reads per worker, where it can be fetched (outside a v1 loop or cond): what reads input, a
        # sparse input's three parts (a dataset's sparse element is a variant, parsed into them).
        self._inputs = {t.name: t for t in per_worker_inputs(source) + [s.dense_shape for s in self._sparse]
                        if t.op._control_flow_context is None}
        self._records, self._start, self._done = [], None, False

    @property
    def active(self):
        return not self._done and len(self._records) < self.steps

    @property
    def pending(self):
        """Why the check has not run yet, or "" when it has or has nothing to check."""
        if self._done or not self._records:
            return ""
        return (f"Config.check_steps={self.steps}: the check did not run: the job ran {len(self._records)} checked "
                f"steps and its Runner was not closed (close it, or use `with runner:`, to check them)")

    def inputs_read(self, ancestors, fed, lookup):
        """The worker's tensors of the inputs a step that runs `ancestors` reads and is not fed (fetched with it), by
        source name."""
        names = {op.name for op in ancestors}
        return {name: lookup(name) for name, t in self._inputs.items() if t.op.name in names and name not in fed}

    def read_start(self, session):
        if self._start is None and self._worker_id == 0:
            self._start = session.run(self._variables)

    def record(self, fetches, feeds, read, ended=False):
        """One checked step: the names it fetched, {source name: value} fed and read, and whether its input ended."""
        self._records.append({"fetches": fetches, "fed": {k: np.asarray(v) for k, v in feeds.items()},
                              "read": read, "ended": ended})

    def finish(self, session):
        """After the last checked step: gather the records; on the chief, replay and report. Raises CheckError
        when a variable differs and Config.check_fails."""
        if self._done or not self._records:
            return
        self._done = True
        gathered = self._gather(pickle.dumps(self._records))
        if gathered is None:
            return
        records = [pickle.loads(b) for b in gathered]
        after = session.run(self._variables)
        _report(self._compare(records, after), len(self._records), self._num_workers, self._fails)

    def _compare(self, records, after):
        same = _identical_batches(records, set(self._inputs) | {n for r in records[0] for n in r["read"]})
        try:
            one_device = self._replay(records)
        except one_device_replay.ReplayError as e:
            return {"replay": str(e), "same": same}
        differing, worst = [], 0.
        for name, value in sorted(after.items()):
            value, expected = np.asarray(value), np.asarray(one_device[name])
            if value.shape != expected.shape:
                differing.append((name, float("inf"), f"shape {value.shape} against {expected.shape}"))
                continue
            if not value.size:
                continue
            diff = float(np.max(np.abs(value.astype(np.float64) - expected.astype(np.float64))))
            worst = max(worst, diff)
            if diff > tolerance(value.dtype, float(np.max(np.abs(expected.astype(np.float64))))):
                differing.append((name, diff, ""))
        ends = [k + 1 for k, r in enumerate(records[0]) if r["ended"]]
        return {"differing": differing, "compared": len(after), "worst": worst, "same": same, "ends": ends}

    def _replay(self, records):
        if len({len(r) for r in records}) > 1:
            raise one_device_replay.ReplayError(f"the workers ran different numbers of steps that train or are "
                                                f"synchronized ({', '.join(str(len(r)) for r in records)})")
        kinds = {name: _kind(self._source, name) for name in self._variables}
        fed = sorted({n for r in records[0] for n in r["fed"] if n in self._inputs})
        read = sorted({n for r in records[0] for n in r["read"]})
        epochs = 1 + sum(r["ended"] for r in records[0])
        initializers = [op.name for op in _initializers(self._source, set(self._variables))]
        replay = one_device_replay.Replay(self._source, kinds, fed, read, initializers, epochs)
        try:
            replay.start(self._start)
            epoch = 0
            for k, step in enumerate(records[0]):
                parts = [r[k] for r in records]
                ended = any(p["ended"] for p in parts)
                replay.step(step["fetches"], self._global(parts, "fed", fed), {} if ended else
                            self._global(parts, "read", read),
                            {n: v for n, v in step["fed"].items() if n not in self._inputs}, epoch, ended)
                epoch += ended
            return replay.values()
        finally:
            replay.close()

    def _global(self, parts, key, names):
        """{name: one device's value} of the workers' values of per-worker inputs (those of `names` each step
        holds): fed rows are blocks of the global batch, what the graph reads is laid out as its sharding says."""
        layout = self._layout if key == "read" else one_device_replay.BLOCKS
        present = [n for n in names if n in parts[0][key]]
        out = {}
        for s in self._sparse:
            triple = [t.name for t in s.tensors]
            if all(n in present for n in triple):
                out.update(zip(triple, one_device_replay.sparse_batch_of(
                    *([p[key][n] for p in parts] for n in triple), layout=layout)))
        for name in present:
            if name not in out:
                out[name] = one_device_replay.batch_of([p[key][name] for p in parts],
                                                       "batch" if name in self._batch else "same", layout)
        return out


def _identical_batches(records, inputs):
    """"all" when in every checked step every worker's batch was the same, "none" when the steps read no input at
    all (their batch is made in the graph: the same in every worker where its random ops are seeded), else None.
    Either way the job computes one worker's batch N times, not N workers' batches. (One step alike can be chance.)"""
    if len(records) < 2:
        return None
    batches = [[{n: v for n, v in {**step["fed"], **step["read"]}.items() if n in inputs} for step in r]
               for r in records]
    if not any(batch for worker in batches for batch in worker):
        return "none"
    alike = all(b[k].keys() == batch.keys() and all(np.array_equal(b[k][n], batch[n]) for n in batch)
                for k, batch in enumerate(batches[0]) for b in batches[1:])
    return "all" if alike else None


def _report(result, steps, num_workers, fails):
    where = f"the first {steps} training step{'s' * (steps != 1)} of {num_workers} worker" \
            f"{'s' * (num_workers != 1)}"
    problems = []
    if result.get("same") == "none":
        problems.append(f"the steps read no input (no feed, no dataset, no queue): each worker makes its batch in "
                        f"the graph, the same one where its random ops are seeded, and the job is one device's "
                        f"batch b {num_workers} times; read the data through parallax.shard(ds), or feed each worker "
                        f"its rows")
    elif result.get("same"):
        problems.append(f"in every checked step, every worker's batch was the same: the job trains on one worker's "
                        f"batch {num_workers} times (shard the input with parallax.shard, or feed each worker its "
                        f"rows of the global batch)")
    if "replay" in result:
        problems.append(f"one device's steps could not be replayed: {result['replay']}")
    elif result["differing"]:
        shown = ", ".join(f"{n} ({why or f'max abs diff {d:.3g}'})" for n, d, why in result["differing"][:8])
        more = len(result["differing"]) - 8
        problems.append(f"{len(result['differing'])} of {result['compared']} variables differ from one device's "
                        f"with the global batch: {shown}" + (f" and {more} more" if more > 0 else ""))
        if result["ends"]:
            problems.append(f"the input ended in checked step {', '.join(map(str, result['ends']))}: there one "
                            f"device may run the writes that read no batch, which parallax runs in no mode "
                            f"(docs/modes.md); check steps before an input's end to compare the rest")
    if not problems:
        print(f"parallax: check: {where} are one device's with the global batch: {result['compared']} variables "
              f"agree (max abs diff {result['worst']:.3g})", file=sys.stderr, flush=True)
        return
    message = f"check of {where}: " + "; ".join(problems)
    if fails:
        raise CheckError(message + " (Config.check_fails=False only warns)")
    print(f"parallax: warning: {message}", file=sys.stderr, flush=True)


def _is_variable(graph, name):
    try:
        return graph.get_operation_by_name(name).type in graph_utils.VARIABLE_OP_TYPES
    except KeyError:
        return False


def _kind(graph, name):
    op = graph.get_operation_by_name(name)
    return ("resource" if op.type == "VarHandleOp" else "ref"), op.get_attr("dtype")


def _initializers(graph, set_later):
    """What initializes the state the check does not set: tables, and variables it does not compare."""
    return list(graph.get_collection(tf1.GraphKeys.TABLE_INITIALIZERS)) + [
        v.initializer for name, v in graph_utils.variables_by_op_name(graph).items()
        if name not in set_later and getattr(v, "initializer", None) is not None]


def server_gather(server, worker_id, num_workers, group):
    """The records' way to the chief in a job with TF servers: a queue on the chief's server."""
    def gather(data):
        graph = tf.Graph()
        with graph.as_default(), tf1.device("/job:worker/task:0"):
            queue = tf1.FIFOQueue(num_workers, [tf.int32, tf.string], shapes=[[], []],
                                  shared_name=f"parallax_check_{group}", name="parallax_check")
            if worker_id != 0:
                op = queue.enqueue([tf.constant(worker_id), tf.constant(data)])
            else:
                op = queue.dequeue_many(num_workers - 1)
        with tf1.Session(server.target, graph=graph) as session:
            if worker_id != 0:
                session.run(op)
                return None
            try:
                ids, parts = session.run(op, options=tf1.RunOptions(timeout_in_ms=GATHER_TIMEOUT_MS))
            except tf.errors.DeadlineExceededError:
                raise CheckError(f"the other workers' records of the checked steps did not reach the chief within "
                                 f"{GATHER_TIMEOUT_MS // 1000} s") from None
        by_worker = dict(zip(ids.tolist(), parts))
        return [data] + [by_worker[w] for w in range(1, num_workers)]
    return gather


def horovod_gather(worker_id):
    """The records' way to the chief in a job of Horovod's collectives without servers: an allgather."""
    def gather(data):
        import horovod.tensorflow as hvd
        graph = tf.Graph()
        with graph.as_default():
            flat = tf.constant(np.frombuffer(data, np.uint8))
            sizes = hvd.allgather(tf.reshape(tf.size(flat), [1]), name="parallax_check_sizes")
            joined = hvd.allgather(flat, name="parallax_check_records")
        with tf1.Session(graph=graph) as session:
            sizes, joined = session.run([sizes, joined])
        if worker_id != 0:
            return None
        ends = np.cumsum(sizes)
        return [joined[end - size:end].tobytes() for size, end in zip(sizes, ends)]
    return gather


def alone(data):
    return [data]


def for_worker(source_graph, variables, plan, config, role, server, collective_group):
    """Config.check_steps: this worker's StepCheck, with how its record of the checked steps reaches the chief
    (its TF server's queue, Horovod's allgather without servers, or nothing to gather alone)."""
    if role.num_workers == 1:
        gather = alone
    elif server is not None:
        gather = server_gather(server, role.worker_id, role.num_workers, collective_group)
    else:
        gather = horovod_gather(role.worker_id)
    return StepCheck(source_graph, variables, config.check_steps, config.check_fails, role.worker_id,
                     role.num_workers, gather, plan.batch_layout)
