"""The `Runner` that `parallax.get_runner` (get_runner.py) returns: a session on the rewritten graph that speaks in the
user's original tensors, ops, variables and names."""
import atexit
import os
import sys

import tensorflow as tf
from tensorflow.python.client.session import SessionInterface
from tensorflow.python.framework import stack

from parallax import collectives
from parallax.rules import batchless_writes, draw_guards, example_counts
from parallax.core import graph_utils
from parallax.runtime import cluster, step_check, step_fence, step_measure, user_initializers
from parallax.errors import CollectiveError, ConfigError, ParallaxError, UnsupportedError
from parallax.runtime.fetch_names import FetchNames, fetch_key, refuse_none
from parallax.runtime.input_end import InputEnds, input_state
from parallax.process.protocol import this_process
from parallax.process.role import report_done, report_examples, report_fed, report_input_end, report_step
from parallax.runtime.sync_step import SyncSteps, collective_variant

tf1 = tf.compat.v1
# The errors under which one worker's end of input reaches the others in a step (runner._check_input_end).
PASSED_ON = (tf.errors.OutOfRangeError, tf.errors.CancelledError, tf.errors.AbortedError)


def _ran(variant):
    """The ops this worker's part of a step runs: with servers, its own inputs feed its contributions, which the
    fetches' data ancestors (through the servers' aggregation) do not reach."""
    return graph_utils.ancestors({op for op in (getattr(x, "op", x) for x in variant.leaves + variant.targets)
                                  if isinstance(op, tf.Operation)})


class Runner(SessionInterface):
    """Runs the rewritten graph. Fetches and feed keys may be the user's own graph elements or their names. It is a
    session to what takes one (a tf1.train.Saver of the user's graph saves and restores through `run`)."""

    INIT_WAIT_SECONDS = 300
    INPUT_PROBE_MS = 10000  # how long an input may take to yield a batch when the runner asks whether it ended

    def __init__(self, source_graph, rewritten, analysis, plan, config, role, server=None, session_config=None,
                 context=None):
        self._source = source_graph
        self._rewritten = rewritten
        self.analysis, self.plan, self.config = analysis, plan, config
        self._role = role
        self._graph = rewritten.graph
        self._variables = graph_utils.variables_by_op_name(self._graph)
        self._names = FetchNames(source_graph, self._graph, self._variables)
        self._update_ops = {self._graph.get_operation_by_name(n) for n in plan.update_ops}
        self._collectives = {self._graph.get_operation_by_name(n) for n in rewritten.collectives}
        self._server = server  # keeps this worker's gRPC server alive as long as the runner
        # who this worker is in its job (protocol.ProcessContext): its control lines go there, from any thread
        self._context = context or this_process()
        self._fence_op = collectives.step_fence_for(plan, self._context.collective_group)
        self._sync = SyncSteps(self._graph, rewritten.sync, role.worker_id, role.num_workers, self._fence_op) \
            if rewritten.sync is not None else None
        self._variants = {}  # fetch key -> Variant (without servers: the fetches as they are)
        self._counts = {}  # fetch key -> the (count, total) tensors of the inputs its synchronized step reads
        self._totals = {}  # count tensor name -> the examples its input yielded in this worker's steps so far
        self._synchronized_steps = 0
        self._fed_inputs = {op for op, _, _ in rewritten.example_counts}  # the first fed step's batch is compared
        atexit.register(self._report_done)  # a script may end without closing its runner
        self._steps = 0
        self._measure = step_measure.StepMeasure.from_env(self._context.environ)
        self._closed = False
        self._defaults = []  # the default graph and session contexts `with runner:` entered
        self._script_groups = user_initializers.ScriptGroups(source_graph, self._graph, role.is_chief)
        self._draws = draw_guards.DrawWatch(self._graph, plan.guarded_draws, role.worker_id)
        self._batchless_warned = False
        self._input_ends = InputEnds(self._graph, role.num_workers, self._fence_op if self._collectives else None,
                                     self._context.collective_group)
        self._check = step_check.for_worker(source_graph, self._variables, plan, config, role, server,
                                             self._context.collective_group) if config.check_steps else None
        self._graph.finalize()
        self._session = tf1.Session(server.target if server else "", graph=self._graph, config=session_config)
        self._initialize()

    # ---- identity ---------------------------------------------------------------------------------------------
    @property
    def worker_id(self):
        return self._role.worker_id

    @property
    def num_workers(self):
        return self._role.num_workers

    @property
    def is_chief(self):
        return self._role.is_chief

    @property
    def graph(self):
        """The graph passed to get_runner, as a Session's: its elements are what `run`, `Tensor.eval` and
        `Operation.run` take (tf1's eval checks that the session's graph is the element's)."""
        return self._source if self._source is not None else self._graph

    @property
    def closed(self):
        return self._closed

    @property
    def rewritten_graph(self):
        """The graph this worker runs (read-only: it is finalized)."""
        return self._graph

    def as_default(self):
        """A context in which this runner is the default session: `loss.eval()`, `train_op.run()` run through it."""
        return stack.default_session(self)

    @property
    def session(self):
        return self._session

    @property
    def sess_str(self):
        return self._session.sess_str

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """As Session.make_callable (queue runners call it): a function of the values of `feed_list` that runs
        `fetches`; with `accept_options`, it also takes `options` and `run_metadata` keywords."""
        feed_list = list(feed_list or ())

        def call(*values, options=None, run_metadata=None):
            if len(values) != len(feed_list):
                raise ParallaxError(f"this callable takes {len(feed_list)} feed value(s), got {len(values)}")
            if not accept_options and (options is not None or run_metadata is not None):
                raise ParallaxError("make this callable with accept_options=True to pass options or run_metadata")
            return self.run(fetches, dict(zip(feed_list, values)) or None, options, run_metadata)
        return call

    def partial_run_setup(self, fetches, feeds=None):
        raise UnsupportedError("partial runs are not supported by a parallax Runner; use run")

    def partial_run(self, handle, fetches, feed_dict=None):
        raise UnsupportedError("partial runs are not supported by a parallax Runner; use run")

    # ---- running ----------------------------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """A step, in stages: the user's fetches and feeds in the rewritten graph, the step's announcement to the
        launcher, its options, the session's run, what the step checks and counts, the values back in the user's
        structure, and what follows a training step (its trace, checkpoint and measure)."""
        if self._closed:
            raise ParallaxError("this Runner is closed; create a new one with get_runner")
        refuse_none(fetches)
        fetches, grouped = self._script_groups.read(fetches, feed_dict)
        flat = tf.nest.flatten(fetches)
        if grouped or any(x is None for x in flat):  # an op read through or skipped: its result is None
            kept = [x for x in flat if x is not None]
            values = iter(self.run(kept + grouped, feed_dict, options, run_metadata) if kept or grouped else ())
            return tf.nest.pack_sequence_as(fetches, [None if x is None else next(values) for x in flat])
        mapped = tf.nest.map_structure(self._names.fetch, fetches)
        leaves = tf.nest.flatten(mapped)
        key = fetch_key(leaves)
        variant = self._variant(key, leaves)
        feeds = self._announced_feeds(variant, feed_dict)
        counts, trains = self._counts_read(key, variant), self._trains(variant)
        trace = trains and self._traces(self._steps + 1)
        options, run_metadata = self._step_options(variant, trace, options, run_metadata)
        guards = self._guarded_draws(variant)
        checked = self._checked_step(variant, leaves, feed_dict) if trains or variant.synchronized else None
        ran = self._session_step(variant, feeds, counts, guards, checked, options, run_metadata)
        self._account(variant, ran, counts, guards, checked)
        out = self._values(variant, ran)
        self._after_step(trains, trace, run_metadata)
        return tf.nest.pack_sequence_as(mapped, out)

    def _announced_feeds(self, variant, feed_dict):
        """The step's feeds in the rewritten graph; a synchronized step is announced to the launcher first (with the
        digest of the first fed batch, example_counts.py)."""
        feeds = {} if feed_dict is None else {self._names.feed_key(k): v for k, v in feed_dict.items()}
        feeds.update(variant.feeds)
        if variant.synchronized:
            self._synchronized_steps += 1
            report_step(self._synchronized_steps, variant.digest, variant.name, self._context)
            fed = example_counts.fed_digest(feeds, self._fed_inputs) if self._fed_inputs and feed_dict else None
            if fed:
                report_fed(self._synchronized_steps, fed, self._context)
                self._fed_inputs = set()
        return feeds

    def _step_options(self, variant, trace, options, run_metadata):
        if trace:
            options = options or tf1.RunOptions()
            options.trace_level = tf1.RunOptions.FULL_TRACE
            run_metadata = run_metadata if run_metadata is not None else tf1.RunMetadata()
        if self._collectives & variant.ancestors:  # TF's collectives: the step's ids (input_end.py)
            options = self._input_ends.keyed(options)
        return options, run_metadata

    def _session_step(self, variant, feeds, counts, guards, checked, options, run_metadata):
        """The session's run of the step; an input's end or a collective another worker left is said as such."""
        try:
            return self._session.run({"leaves": [x for x in variant.leaves if x is not None],
                                      "targets": variant.targets + variant.branch_targets,
                                      "released": variant.released or [], "examples": [c for c, _ in counts],
                                      "guards": [pred for _, _, pred, _, _, _ in guards],
                                      "checked": checked[2] if checked else {}},
                                     feed_dict=feeds or None, options=options, run_metadata=run_metadata)
        except tf.errors.OpError as e:
            if counts and isinstance(e, PASSED_ON):
                self._check_input_end(variant, counts, e, checked)  # raises when the step's error is an input's end
            stuck = collectives.collective_named(e.message, self._collective_names(variant))
            if stuck is None:
                raise
            first = (e.message.strip().splitlines() or [""])[0]
            raise CollectiveError(
                f"worker {self.worker_id}: collective {stuck} did not complete in synchronized step "
                f"{self._synchronized_steps} (fetches {variant.name}): another worker failed, stopped or left the "
                f"job before it (every worker must run the same synchronized steps); {type(e).__name__}: "
                f"{first}") from e

    def _account(self, variant, ran, counts, guards, checked):
        """The step's record for the check, its guarded draws, and the examples its inputs yielded."""
        if checked:
            self._record_checked(checked[:2], ran["checked"])
        if guards:
            self._draws.check(guards, ran["guards"], f"synchronized step {self._synchronized_steps}"
                              if variant.synchronized else "a step")
        if counts:
            for (count, _), n in zip(counts, ran["examples"]):
                self._totals[count.name] = self._totals.get(count.name, 0) + int(n)
            report_examples(self._synchronized_steps, [int(n) for n in ran["examples"]], self._context)

    @staticmethod
    def _values(variant, ran):
        """The fetched values in the order of the fetches' leaves (a value the chief released in its place)."""
        values = iter(ran["leaves"])
        out = [None if x is None else next(values) for x in variant.leaves]
        for i, k in variant.from_chief.items():
            out[i] = ran["released"][k]
        return out

    def _after_step(self, trains, trace, run_metadata):
        if trace:
            step_measure.write_trace(self.config.log_dir, self.worker_id, self._steps + 1, run_metadata)
        if trains:
            self._steps += 1
            every = self.config.save_checkpoint_steps
            if every and self.is_chief and self._steps % every == 0:
                self.save_checkpoint()
            if self._measure:
                self._measure.after_step(self._steps, self)

    def _checked_step(self, variant, leaves, feed_dict):
        """(fetched names, {fed source name: value}, {input name: tensor to fetch}) of a step the check records: one
        that trains or is synchronized (a micro-step that adds the aggregated gradients into accumulators is one)."""
        if self._check is None or not self._check.active:
            return None
        self._check.read_start(self._session)
        fed = {}
        for key, value in (feed_dict or {}).items():
            mapped = self._names.feed_key(key)
            if isinstance(mapped, tf.SparseTensor):  # fed a SparseTensorValue (or a tuple of its three parts)
                fed.update(zip((t.name for t in (mapped.indices, mapped.values, mapped.dense_shape)), tuple(value)))
            else:
                fed[mapped.name] = value
        names = [x.name for x in tf.nest.flatten([x for x in leaves if x is not None], expand_composites=True)
                 if graph_utils.holds(self._source, x.name)]
        return names, fed, self._check.inputs_read(_ran(variant), fed, self._names.lookup)

    def _record_checked(self, step, read, ended=False):
        self._check.record(*step, read, ended)
        if not self._check.active:
            self._check.finish(self._session)

    def _guarded_draws(self, variant):
        """The guarded draws (draw_guards.py) this worker's step runs the cond of, and not yet warned of."""
        guards = self._draws.predicates(variant.ancestors)
        if self._sync is not None and not self.is_chief:  # a cond only the chief runs is the chief's to watch
            guards = [g for g in guards if g[1] not in self._sync.chief_only]
        return guards

    def _collective_names(self, variant):
        fences = [op.name for op in variant.targets if op.name.startswith(step_fence.FENCE_SCOPE)]
        return {op.name for op in self._collectives} | set(fences)

    def _traces(self, step):
        return step in self.config.profile_steps and self.worker_id in self.config.profile_workers

    def take_chief_values(self):
        """Every worker's replicated variables take the chief's values (the broadcast that follows the runner's
        initialization); variables on servers have one copy already. Every worker calls it at the same point."""
        if self._rewritten.broadcast_op is not None:
            self._session.run(self._rewritten.broadcast_op, options=self._input_ends.broadcast_options())

    def save_checkpoint(self):
        """Save every global variable under the user's names into Config.checkpoint_dir; returns the path."""
        if not self.config.checkpoint_dir:
            raise ConfigError("save_checkpoint() needs Config.checkpoint_dir")
        os.makedirs(self.config.checkpoint_dir, exist_ok=True)
        with self._graph.as_default():  # also from an exit hook, where TF's default context is eager
            return self._rewritten.saver.save(self._session, os.path.join(self.config.checkpoint_dir, "model.ckpt"),
                                              global_step=self._global_step())

    def _report_done(self):
        if not getattr(self, "_done_reported", False):
            self._done_reported = True
            if self._check is not None and self._check.pending and self.is_chief:
                print(f"parallax: warning: {self._check.pending}", file=sys.stderr, flush=True)
            report_done(self._synchronized_steps, self._context)

    def close(self):
        if self._closed:
            return
        if self._check is not None:
            self._check.finish(self._session)  # a job that stopped before its last checked step
        self._report_done()
        try:
            if self.config.checkpoint_dir and self.is_chief and self._steps:
                self.save_checkpoint()
        finally:
            self._closed = True
            atexit.unregister(self._report_done)  # which would keep this runner and its graphs alive until exit
            self._session.close()

    def __enter__(self):
        # as a Session's: its graph and itself the defaults inside, so `train_op.run(feed_dict=...)` works
        self._defaults = [self.graph.as_default(), self.as_default()]
        for context in self._defaults:
            context.__enter__()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        for context in reversed(self._defaults):
            context.__exit__(exc_type, exc_value, traceback)
        self._defaults = []
        if exc_type is not None:
            # Leaving by an exception is a failure, which the launcher hears from the exception hook; a "done"
            # first would read as an early end of the steps and hide the exception.
            self._done_reported = True
        self.close()
        return False

    # ---- internals --------------------------------------------------------------------------------------------
    def _initialize(self):
        ckpt = tf1.train.latest_checkpoint(self.config.checkpoint_dir) if self.config.checkpoint_dir else None
        if self._rewritten.ready_op is not None and not self.is_chief:
            # variables on the servers: the chief initializes them, once
            cluster.wait_for_chief(self._session, self._rewritten.ready_op, self.worker_id, self.INIT_WAIT_SECONDS)
            self._session.run(self._rewritten.replica_init_op)
        elif ckpt and (self.is_chief or self._rewritten.broadcast_op is None):
            self._rewritten.saver.restore(self._session, ckpt)
        else:
            self._session.run(self._rewritten.init_op)
        self._session.run(self._rewritten.local_init_op)
        if self._rewritten.broadcast_op is not None:  # every worker starts from the chief's values
            self._session.run(self._rewritten.broadcast_op, options=self._input_ends.broadcast_options())
        self._input_ends.start(self._session)

    def _global_step(self):
        step = next((s.name for s in self.analysis.state if s.kind == "global_step"), None)
        return int(self._session.run(self._variables[step])) if step in self._variables else self._steps

    def _variant(self, key, leaves):
        if self._sync is not None:
            return self._sync.variant(key, leaves)
        if key not in self._variants:
            self._variants[key] = collective_variant(self._graph, key, leaves, self._collectives, self.num_workers,
                                                     self._fence_op)
        return self._variants[key]

    def _check_input_end(self, variant, counts, error, checked=None):
        """A synchronized step failed with an error that may be an input's end: this worker's, or another's that TF
        passed on to the workers that wait for its tensors (as OutOfRangeError, or as the step's cancellation or
        abort: with TF's collectives, the workers' steps share their ids). Which it is, this worker's counters of
        examples tell: its inputs yielded their batch in the step, or do now (taken only to tell: the job cannot go
        on then), or are at their end. Reports an end to the launcher, which checks that every worker's input ended
        in the same step. Raises CollectiveError when another worker's input ended while this one's had a batch,
        OutOfRangeError when this one's ended (whatever error TF gave); returns otherwise (the caller raises)."""
        step = self._synchronized_steps
        delivered, ended = input_state(self._session, counts, self._totals, self.INPUT_PROBE_MS)
        where = f"worker {self.worker_id}: synchronized step {step} (fetches {variant.name})"
        if delivered and isinstance(error, tf.errors.OutOfRangeError):
            raise CollectiveError(
                f"{where} failed with another worker's end of input (OutOfRangeError, which TF passes on to the "
                f"workers that wait for it), while this worker's input had a batch: the workers' shares of the data "
                f"hold different numbers of batches") from error
        if ended or isinstance(error, tf.errors.OutOfRangeError):
            if checked:
                self._record_checked(checked[:2], {}, ended=True)
            report_input_end(step, self._context)
            self._input_ends.ended(self._session, where)
            if self.is_chief and self.plan.batchless_writes and not self._batchless_warned:
                self._batchless_warned = True  # once a job: every epoch ends alike
                print(f"parallax: warning: {batchless_writes.note(self.plan.batchless_writes, step)}",
                      file=sys.stderr, flush=True)
        if ended and not isinstance(error, tf.errors.OutOfRangeError):
            raise tf.errors.OutOfRangeError(None, None, f"End of sequence: {where}: this worker's input ended (TF "
                                            f"ended the step with {type(error).__name__}, as another worker's step "
                                            f"ended at the same time)") from error

    def _counts_read(self, key, variant):
        """[(count, total)] tensors of the inputs this worker's part of a synchronized step reads."""
        if not variant.synchronized:
            return []
        if key not in self._counts:
            names = example_counts.read_in(self._rewritten.example_counts, _ran(variant))
            self._counts[key] = [tuple(self._graph.get_tensor_by_name(n) for n in pair) for pair in names]
        return self._counts[key]

    def _trains(self, variant):
        """Does this run update a trained variable? (Counts steps for checkpointing and tracing.) A worker's part
        of a synchronized step counts too: the chief runs the updates for it."""
        return bool(self._update_ops & variant.ancestors)
