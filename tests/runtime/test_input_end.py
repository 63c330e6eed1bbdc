"""input_end.py's contract, without processes (tests/test_uneven_data.py runs it in jobs): which collectives run
after an input's end, in which order and under which graph keys, and when nothing is built."""
import pytest
import tensorflow as tf

from parallax.runtime import input_end
from parallax.errors import CollectiveError

tf1 = tf.compat.v1


class Session:
    """Records (op name, graph key, timeout) per run; raises `fail` on the first run if given."""
    def __init__(self, fail=None):
        self.runs, self.fail = [], fail

    def run(self, op, options=None):
        if self.fail is not None:
            raise self.fail
        self.runs.append((op.name, options.experimental.collective_graph_key, options.timeout_in_ms))


def _scalar(digest, name):
    return tf.identity(tf.constant(int(digest, 16) % 1000), name=name).op


def test_an_end_meets_the_others_then_retires_the_failed_steps_id_under_the_steps_key():
    g = tf.Graph()
    ends = input_end.InputEnds(g, 2, _scalar)
    session = Session()
    ends.start(session)
    ends.ended(session, "worker 1: synchronized step 6")
    meeting = ("parallax_input_end", input_end.MEETING_GRAPH_KEY, input_end.MEETING_TIMEOUT_S * 1000)
    moving_on = ("parallax_next_id", input_end.STEPS_GRAPH_KEY, 0)
    assert session.runs == [meeting, moving_on, meeting, moving_on]
    assert input_end.MEETING_GRAPH_KEY != input_end.STEPS_GRAPH_KEY
    given = tf1.RunOptions(timeout_in_ms=5, trace_level=tf1.RunOptions.FULL_TRACE)
    keyed = ends.keyed(given)
    assert keyed.experimental.collective_graph_key == input_end.STEPS_GRAPH_KEY
    assert (keyed.timeout_in_ms, keyed.trace_level) == (5, tf1.RunOptions.FULL_TRACE)
    assert given.experimental.collective_graph_key == 0  # the caller's options are not changed


def test_without_shared_step_ids_nothing_is_built_or_run():
    for workers, scalar in ((2, None), (1, _scalar)):
        g = tf.Graph()
        ends = input_end.InputEnds(g, workers, scalar)
        session = Session()
        ends.start(session)
        ends.ended(session, "worker 0: synchronized step 3")
        assert session.runs == [] and not g.get_operations()
        assert ends.keyed(None) is None


def test_a_meeting_that_times_out_names_the_step_and_the_likely_cause():
    ends = input_end.InputEnds(tf.Graph(), 2, _scalar)
    timeout = tf.errors.DeadlineExceededError(None, None, "Timed out")
    with pytest.raises(CollectiveError) as raised:
        ends.ended(Session(fail=timeout), "worker 1: synchronized step 6 (fetches train)")
    assert "worker 1: synchronized step 6 (fetches train): this worker's input ended" in str(raised.value)
    assert "different numbers of batches" in str(raised.value)
