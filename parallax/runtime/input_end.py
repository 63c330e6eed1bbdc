"""What a worker does after its input's end in a synchronized step, so that a job may go on (a new epoch), with TF's
collectives (the `tf` backend). Its steps share ids with the other workers' steps there: the group leader hands out
one sequence of step ids per graph key, and a failed step's id is not retired, so each worker's next step reuses it.

- *The meeting.* A worker whose step ended at its input's end waits until every worker's step of the same number
  has ended, before its script goes on. A worker that went on at once would run its next step's collectives while
  another worker's failed step still runs, and that step's end aborts them: the job fails with a collective error
  instead of going on. The meeting is one scalar collective, under a graph key of its own.
- *The step id moves on.* Then every worker runs one more scalar collective under the steps' graph key: it takes
  the failed step's id, touches no server, and retires that id, so the next step runs under a new one. Run under
  the failed step's id, the next step would meet what that step left on the servers: its clean-up, or an abort TF
  sends there a second late ("Step <id> cancelled").
- Both collectives run once before the first step: after a failed step, TF sets up no collective that it has not run
  before (the failure aborts the process's collective parameter resolution); known ones run again.
"""
import tensorflow as tf

from parallax.errors import CollectiveError
from parallax.runtime.sync_step import fetch_digest

tf1 = tf.compat.v1
STEPS_GRAPH_KEY = 0x7a11a0  # every synchronized step with TF's collectives runs under it (group 1's: a launched job's)
MEETING_GRAPH_KEY = STEPS_GRAPH_KEY - 1
MEETING_TIMEOUT_S = 120  # the launcher ends a job whose workers' inputs end in different steps sooner (STRANDED_S)


def graph_keys(group):
    """(the steps' graph key, the meeting's, the initial broadcast's) of collective group `group`. The group leader
    hands out step ids per graph key and every worker keeps its place in that sequence: the jobs a thread job's
    servers run one after another (thread_job.py, one group each) must not share a sequence, or a task that sat out
    the last job would start at another step id than the others. (Left to TF, the broadcast's key is a hash of the
    graph's instance keys: the same for two jobs of one graph.)"""
    steps = STEPS_GRAPH_KEY + 3 * (group - 1)
    return steps, steps - 1, steps - 2


class InputEnds:
    def __init__(self, graph, num_workers, scalar_collective, group=1):
        """`scalar_collective(digest, name)`: the backend's (collectives.step_fence_for), or None when the steps
        share no ids (no TF collectives, or one worker); `group`: the job's collective group. Call before the graph
        is finalized."""
        self._steps_key, self._meeting_key, self._start_key = graph_keys(group)
        self._meeting = self._moving_on = None
        if scalar_collective is not None and num_workers > 1:
            with graph.as_default():
                self._meeting = scalar_collective(fetch_digest(("parallax: input end",)), "parallax_input_end")
                self._moving_on = scalar_collective(fetch_digest(("parallax: next step id",)), "parallax_next_id")

    def start(self, session):
        """Every worker, once, before its first step."""
        self._run_both(session)

    def keyed(self, options):
        """`options` (or None) for a step that runs TF's collectives: under the steps' graph key."""
        if self._meeting is None:
            return options
        return _keyed(options, self._steps_key)

    def broadcast_options(self):
        """RunOptions for the initial broadcast of the chief's values (before the first step): under a graph key
        of the job's own. None without TF's collectives between workers."""
        return None if self._meeting is None else _keyed(None, self._start_key)

    def ended(self, session, where):
        """This worker's input ended in the step `where` names: meet the others, and move the step id on."""
        try:
            self._run_both(session)
        except tf.errors.DeadlineExceededError as e:
            raise CollectiveError(f"{where}: this worker's input ended, and some other worker's step did not end "
                                  f"within {MEETING_TIMEOUT_S} s: the workers' shares of the data hold different "
                                  f"numbers of batches, or a worker stopped running steps") from e

    def _run_both(self, session):
        if self._meeting is not None:
            session.run(self._meeting, options=_keyed(tf1.RunOptions(timeout_in_ms=MEETING_TIMEOUT_S * 1000),
                                                      self._meeting_key))
            session.run(self._moving_on, options=self.keyed(None))


def input_state(session, counts, totals, probe_ms):
    """(delivered, ended) of a worker's inputs after a failed synchronized step: whether they yielded their batch
    in it (their totals grew past `totals`, the examples counted before it), or do now (taken only to tell: the
    job cannot go on then), or are at their end. `counts`: [(count, total)] tensors of the inputs it reads."""
    now = session.run([total for _, total in counts])
    if any(int(t) > totals.get(c.name, 0) for (c, _), t in zip(counts, now)):
        return True, False
    try:
        session.run([c for c, _ in counts], options=tf.compat.v1.RunOptions(timeout_in_ms=probe_ms))
        return True, False
    except tf.errors.OutOfRangeError:
        return False, True
    except tf.errors.DeadlineExceededError:  # an input that waits (a queue nobody fills): cannot tell
        return False, False


def _keyed(options, key):
    keyed = tf1.RunOptions()
    if options is not None:
        keyed.CopyFrom(options)
    keyed.experimental.collective_graph_key = key
    return keyed
