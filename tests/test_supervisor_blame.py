"""Whom the supervisor blames when several processes end at once: a stand-in for spawn (or mpirun) writes the lines a
real job would, in the order a race can give them. Plain Python: no TensorFlow, no network."""
import io
import sys
import textwrap

import pytest

from parallax.launcher import spawn
from parallax.launcher.job import LaunchOptions
from parallax.launcher.layout import Layout, Process
from parallax.process.protocol import CONTROL_PREFIX
from parallax.process.resource_spec import ResourceSpec
from parallax.launcher.supervisor import Supervisor

SPEC = ResourceSpec.parse("localhost: 0,1")
LOST = "UnavailableError: Connection reset by peer (from remote target /job:worker/replica:0/task:1)"


def _job(tmp_path, capsys, lines):
    """The supervisor's report for a main process that writes `lines` ((delay in s, text), ...) and exits 1."""
    host = SPEC.hosts[0]
    layout = Layout(SPEC, [Process(host, 0, "worker", w, None) for w in range(2)], None, str(tmp_path), sys.executable)
    script = textwrap.dedent(f"""
        import sys, time
        for delay, text in {lines!r}:
            time.sleep(delay)
            print(text, flush=True)
        sys.exit(1)""")
    code = Supervisor([sys.executable, "-c", script], None, layout, [], LaunchOptions(stall_warning_s=0),
                      out=io.StringIO()).run()
    return code, capsys.readouterr().err


def _failed(rank, what):
    return f"[1,{rank}]<stderr>:{CONTROL_PREFIX} failed 1.0 {what}"


def _ended(rank, code):
    return f"parallax-spawn: process rank {rank} with PID 4{rank} on node localhost exited with a non-zero " \
           f"status.\nExit code: {code}"


@pytest.mark.parametrize("agent_exit_after", [0.0, 0.4])
def test_a_killed_worker_is_named_though_a_peer_it_cut_off_reported_and_ended_first(tmp_path, capsys,
                                                                                     agent_exit_after):
    """Worker 1 is killed; worker 0 loses its connection to it, reports that, and ends; spawn sees worker 0's end
    first and names only it. Worker 1's host agent records its end (ssh transport) a moment after worker 0's report:
    worker 1 is the cause (CI, TF 2.21: "localhost/worker/0 failed first")."""
    killed = f"[1,1]<stderr>:{CONTROL_PREFIX} exit -9"
    code, out = _job(tmp_path, capsys, [(0, _failed(0, LOST)), (agent_exit_after, killed), (0, _ended(0, 1))])
    assert code == 1
    assert f"job failed: localhost/worker/1 was killed by signal 9 (SIGKILL); then localhost/worker/0: {LOST}" \
           in out, out


def test_a_worker_that_failed_with_a_message_is_named_first_over_the_peers_stopped_after_it(tmp_path, capsys):
    """Spawn stops the others once it has named worker 1: worker 0's agent then records its end by SIGTERM."""
    code, out = _job(tmp_path, capsys, [(0, _failed(1, "ValueError: bad batch")), (0, _ended(1, 1)),
                                        (0, f"[1,0]<stderr>:{CONTROL_PREFIX} exit -15")])
    assert code == 1
    assert "job failed: localhost/worker/1 failed first: ValueError: bad batch" in out, out


def test_a_rank_spawn_names_that_said_nothing_is_the_cause(tmp_path, capsys):
    code, out = _job(tmp_path, capsys, [(0, _failed(0, LOST)), (0, _ended(1, 3))])
    assert code == 1
    assert f"job failed: localhost/worker/1 exited with code 3; then localhost/worker/0: {LOST}" in out, out


class _Ended:
    """A worker spawn started that has already ended with `returncode`."""
    def __init__(self, rank, returncode):
        self.pid, self.returncode = 40 + rank, returncode

    def poll(self):
        return self.returncode

    def send_signal(self, signum):
        raise AssertionError("an ended worker is not signalled")


def test_spawn_records_every_local_end_and_names_the_killed_worker_when_both_end_in_one_poll(monkeypatch, capsys):
    """Worker 0 ended (code 1) because worker 1 was killed, within one of spawn's polls: spawn names worker 1, and
    writes each local worker's end as a host agent would, which the supervisor reads as the cause."""
    codes = {0: 1, 1: -9}
    monkeypatch.setattr(spawn, "start", lambda w: (_Ended(w["rank"], codes[w["rank"]]), []))
    assert spawn.run([{"rank": r, "host": "localhost", "stdin": None} for r in (0, 1)]) == 1
    out = capsys.readouterr().out
    assert f"[1,0]<stderr>:{CONTROL_PREFIX} exit 1" in out and f"[1,1]<stderr>:{CONTROL_PREFIX} exit -9" in out
    assert "process rank 1 with PID 41 on node localhost exited on signal 9" in out, out
    assert "process rank 0" not in out, out
