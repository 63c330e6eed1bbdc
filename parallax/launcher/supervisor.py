"""Run a job's processes, forward their output, and tear all of them down, on every host, on failure or signal.

mpirun runs the workers; services (parameter servers) start before it and are stopped after it. Every process
announces itself, and its failures, with control lines in its output (role.CONTROL_PREFIX), which reach us through
mpirun and ssh from any host; each also records `pid.<name>` in the job directory on its own host, by which teardown
stops it there (recorded_pids.stop). Imports no TensorFlow.
"""
import collections
import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time

from parallax.launcher import mpirun, recorded_pids, ssh
from parallax.launcher.blame import Evidence, blame
from parallax.launcher.input_ledger import InputLedger
from parallax.launcher.output_router import OutputRouter
from parallax.launcher.processes import signal_group, terminate_when_parent_dies
from parallax.launcher.rank_output import RankLines, describe_exit, failed_rank, lines_of
from parallax.launcher.step_ledger import StepLedger
from parallax.launcher.watchdog import Watchdog
from parallax.process import control_lines
GRACE_SECONDS = 3.0  # between SIGTERM and SIGKILL at teardown (the whole teardown must fit in 5 s)
SETTLE_SECONDS = 1.0  # after a failure, how long to wait for a silent death (a server's, a worker's): the cause
MPIRUN = "launcher/mpirun"
SPAWN = "launcher/spawn"  # transport ssh: spawn.py starts the workers


class _Proc:
    def __init__(self, label, command, env, stdin_text=None, process=None):
        self.label, self.command, self.env, self.stdin_text, self.process = label, command, env, stdin_text, process
        self.popen = None
        self.reader = None


class Supervisor:
    def __init__(self, main_command, main_env, layout, services, options, out=None, main_stdin=None):
        """`main_command` starts the workers: mpirun, or spawn.py (which tags their output as mpirun does);
        `services`: (layout Process, argv, env, stdin text) of the parameter servers (and ssh tunnels)."""
        self.layout, self.options = layout, options
        label = MPIRUN if mpirun.is_mpirun(main_command) else SPAWN
        self.main = _Proc(label, main_command, main_env, main_stdin)
        self.services = [_Proc(p.label, argv, env, text, p) for p, argv, env, text in services]
        self.rank_labels = {p.index: p.label for p in layout.workers()}
        self.expected = [p.label for p in layout.processes]
        self.output = OutputRouter(out or sys.stdout, options.log_dir, label)
        self.up, self.failures, self.exit_codes, self.serving = {}, [], {}, set()
        self._silent_death = None  # (label, how it ended): a worker that ended without a word, after a failure
        self._early_ends = []  # (worker, exit status) from its host agent, before mpirun named a failed rank
        self.steps, self.step_problem = StepLedger(), None
        self.inputs = InputLedger()  # the workers' counts of examples, and where their inputs ended
        self.watchdog = Watchdog(list(self.rank_labels.values()), options.stall_warning_s, options.stall_timeout_s)
        self._watch_lock = threading.Lock()  # fed by the reader threads, checked by the main one
        self._on_control = {control_lines.Up: self._on_up, control_lines.Serving: self._on_serving,
                            control_lines.Failed: self._on_failed, control_lines.Exit: self._on_exit,
                            control_lines.Step: self._on_step, control_lines.Examples: self._on_examples,
                            control_lines.Fed: self._on_fed, control_lines.InputEnd: self._on_input_end,
                            control_lines.Done: self._on_done}
        self._stopping = None
        self._torn_down = False
        self._started_at = None

    # ---- running ----------------------------------------------------------------------------------------------
    def run(self):
        """Start, forward output, wait. Returns the job's exit status (non-zero on any failure)."""
        previous = self._install_signal_handlers()
        self._started_at = time.time()
        try:
            for service in self.services:
                self._start(service, self._forward_plain)
            if self.options.transport == "ssh":
                problem = self._servers_serving()
                if problem is not None or self._stopping is not None:  # before any worker started
                    self.teardown()
                    return self._outcome(problem)
            self._start(self.main, self._forward_mpirun)
            problem = self._wait()
            if self._stopping is not None:
                self.teardown()  # at once: a signal asks for it within seconds
            elif problem is not None or self.failures or self.main.popen.poll() not in (None, 0):
                problem = self._dead_service_after(SETTLE_SECONDS) or problem
                self._silent_death = self._silent_death_after(SETTLE_SECONDS) if self.failures else None
                self.teardown()  # do not wait for mpirun to notice: a failed worker's peers may be blocked
            self.main.reader.join(timeout=10 if self.main.popen.returncode == 0 else 2)
            return self._outcome(problem)
        finally:
            self.teardown()
            self._restore_signal_handlers(previous)
            self.output.close()

    def _outcome(self, problem):
        """The job's exit status, after reporting whom blame.py names (`problem`: what ended the wait)."""
        first = min(self.failures) if self.failures else None
        rank = failed_rank("\n".join(self.output.launcher_lines))
        verdict = blame(Evidence(
            signal=self._stopping, step_problem=self.step_problem,
            dead_service=(problem.label, self.exit_codes.get(problem.label, problem.popen.returncode))
            if isinstance(problem, _Proc) else None,
            message=problem if isinstance(problem, str) else None,
            stalled=problem if isinstance(problem, tuple) else None,
            first_failure=first[1:] if first else None, silent_death=self._silent_death,
            behind=self.inputs.behind(first[1]) if first else None, main_exit=self.main.popen.returncode or 0,
            failed_rank=(self._rank_label(rank[0]), rank[1]) if rank else None))
        if self._stopping is not None:
            self.output.say(f"stopped by signal {self._stopping}; all processes torn down")
        elif verdict.what:
            self._report(verdict.what, verdict.label)
        return verdict.code

    def _start(self, proc, forward):
        proc.popen = subprocess.Popen(proc.command, env=proc.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.PIPE if proc.stdin_text else subprocess.DEVNULL,
                                      start_new_session=True, preexec_fn=terminate_when_parent_dies(os.getpid()))
        if proc.stdin_text:
            # The remote agent reads its environment from this line, and stops its process when stdin closes:
            # so the pipe stays open for as long as the job runs.
            proc.popen.stdin.write(proc.stdin_text.encode())
            proc.popen.stdin.flush()
        proc.reader = threading.Thread(target=forward, args=(proc,), daemon=True)
        proc.reader.start()

    def _wait(self):
        """Until the workers end, a worker fails, a signal arrives, a service dies or start-up times out. Returns
        the dead service, a message, or None."""
        reported = 0
        while self._stopping is None and self.main.popen.poll() is None and not self.failures:
            self.step_problem = self.step_problem or self.inputs.stranded(time.time())
            if self.step_problem:
                return self.step_problem
            for service in self.services:
                if service.popen.poll() is not None:
                    return service  # run() then waits for its last lines (_dead_service_after)
            if len(self.up) != reported:
                reported = len(self.up)
                self._progress()
            with self._watch_lock:
                notes, stalled = self.watchdog.check(time.time())
            for note in notes:
                self._say(note)
            if stalled:
                return stalled
            waited = time.time() - self._started_at
            if len(self.up) < len(self.expected) and waited > self.options.start_timeout:
                missing = [label for label in self.expected if label not in self.up]
                return (f"start-up timed out: {len(missing)} of {len(self.expected)} processes were not up after "
                        f"{self.options.start_timeout:g} s (--start-timeout): {', '.join(missing)}")
            time.sleep(0.1)
        return None

    def _servers_serving(self):
        """Until every parameter server says it listens (transport ssh): None, or the dead service or a message."""
        servers = [s for s in self.services if s.process.role == "ps"]
        while self._stopping is None and not all(s.label in self.serving for s in servers):
            dead = next((s for s in self.services if s.popen.poll() is not None), None)
            if dead is not None:
                return self._dead_service_after(SETTLE_SECONDS) or dead
            if time.time() - self._started_at > self.options.start_timeout:
                missing = [s.label for s in servers if s.label not in self.serving]
                return (f"start-up timed out: parameter server(s) {', '.join(missing)} not serving after "
                        f"{self.options.start_timeout:g} s (--start-timeout); no worker was started")
            time.sleep(0.1)
        return None

    def _silent_death_after(self, seconds):
        """(label, how it ended) of a worker that ended without reporting a failure (a signal, a bare exit), seen
        within `seconds`, or None. Called before teardown, whose stops would look the same."""
        deadline = time.time() + seconds
        while True:
            found = self._silent_death_now()
            if found or time.time() > deadline or self.main.popen.poll() is not None:
                return found or self._silent_death_now()
            time.sleep(0.05)

    def _silent_death_now(self):
        failed = {f[1] for f in self.failures}
        # A host agent's record of its worker's end (transport ssh) comes as soon as it ends; mpirun (or spawn)
        # names only the first rank it saw end, which may be a worker that failed because of that death.
        for label, code in list(self._early_ends):
            if code != 0 and label not in failed:
                return label, describe_exit(code)
        found = failed_rank("\n".join(self.output.launcher_lines))
        if found is not None and self._rank_label(found[0]) not in failed:
            return self._rank_label(found[0]), found[1]
        return None

    def _dead_service_after(self, seconds):
        """A server that died is the cause, even when the workers it left reported their errors first: servers
        only serve, so a worker's failure cannot kill them. Its exit can take a moment to arrive over ssh."""
        deadline = time.time() + seconds
        while True:
            dead = [s for s in self.services if s.popen.poll() is not None]
            if dead or time.time() > deadline:
                if dead:
                    time.sleep(0.2)  # its exit record follows its last line
                return dead[0] if dead else None
            time.sleep(0.05)

    def _progress(self):
        total = len(self.expected)
        if total == 1:
            return
        if len(self.up) == total:
            self._say(f"all {total} processes up after {time.time() - self._started_at:.1f} s")
            return
        missing = [label for label in self.expected if label not in self.up]
        shown = ", ".join(missing[:4]) + (", ..." if len(missing) > 4 else "")
        self._say(f"{len(self.up)}/{total} processes up; waiting for {shown}")

    # ---- teardown ---------------------------------------------------------------------------------------------
    def teardown(self):
        """Stop everything at once: the process groups we started here, and on every host the processes the job
        recorded there (SIGTERM, a grace of GRACE_SECONDS, SIGKILL; hosts in parallel), so that the whole teardown
        takes one grace period, not one per layer. A second call (run's `finally` after a failure or a signal) has
        nothing left to do and returns at once: it would cost an ssh round trip per remote host."""
        if self._torn_down:
            return
        started = [p.popen for p in [self.main, *self.services] if p.popen is not None and p.popen.poll() is None]
        for popen in started:
            signal_group(popen.pid, signal.SIGTERM)
        names = collections.defaultdict(list)
        for p in self.layout.processes:
            names[p.host_index].append(p.name)
            if not p.host.is_local:  # a remote server's (or, over ssh, worker's) agent
                names[p.host_index].append(f"agent.{p.name}")
        job_dir = self.layout.job_dir
        local = [n for i, ns in names.items() if self.layout.hosts[i].is_local for n in ns]
        stopped_here = threading.Thread(target=recorded_pids.stop, args=(job_dir, local), kwargs={"grace": GRACE_SECONDS},
                                        daemon=True)
        stopped_here.start()
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            elsewhere = pool.submit(
                ssh.on_remote_hosts, self.layout.spec, self.options.ssh,
                lambda host, index: [self.layout.python, "-m", "parallax.launcher.host_agent", "stop", job_dir,
                                     *names[index]])
            deadline = time.time() + GRACE_SECONDS
            for popen in started:
                try:
                    popen.wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    signal_group(popen.pid, signal.SIGKILL)
                    popen.wait()
            stopped_here.join()
            survivors = elsewhere.result()
        for host, result in survivors.items():
            if isinstance(result, Exception):
                self._say(f"could not stop the job's processes on {host}: {result}")
            elif result.strip() not in ("", "{}"):
                self._say(f"processes still alive on {host} after SIGKILL: {result.strip()}")
        self._torn_down = True

    # ---- output -----------------------------------------------------------------------------------------------
    def _forward_mpirun(self, proc):
        lines = RankLines()
        for line in lines_of(proc.popen):
            for rank, text in lines.feed(line):
                if rank is None:
                    self.output.launcher_line(text)
                else:
                    self._process_line(self._rank_label(rank), text)
        for rank, text in lines.rest():
            self._process_line(self._rank_label(rank), text)

    def _forward_plain(self, proc):
        for line in lines_of(proc.popen):
            self._process_line(proc.label, line)

    def _rank_label(self, rank):
        return self.rank_labels.get(rank, f"?/worker/{rank}")

    def _process_line(self, label, text):
        with self._watch_lock:
            self.watchdog.heard(label, time.time())
        if not control_lines.is_control(text):
            self.output.process_line(label, text)
            return
        message = control_lines.parse(text)
        handler = self._on_control.get(type(message))
        if handler is not None:
            handler(label, message, time.time())

    # ---- control lines (control_lines.py), one handler per record ---------------------------------------------
    def _on_up(self, label, message, now):
        self.up.setdefault(label, now)
        with self._watch_lock:
            self.watchdog.up(label, now)

    def _on_serving(self, label, message, now):
        self.serving.add(label)

    def _on_failed(self, label, message, now):
        self.failures.append((message.time, label, message.what))
        self.inputs.stopped.add(label)

    def _on_exit(self, label, message, now):
        self.exit_codes[label] = message.code
        if label in self.rank_labels.values() and failed_rank("\n".join(self.output.launcher_lines)) is None:
            self._early_ends.append((label, message.code))  # not one that spawn (or mpirun) stopped
        with self._watch_lock:
            self.watchdog.ended(label, now)

    def _on_step(self, label, message, now):
        if not self.step_problem:  # the first problem is the cause; the ledgers stop at it
            self.step_problem = self.steps.started(label, message.step, message.digest, message.name) or \
                self.inputs.started(label, message.step)
        with self._watch_lock:
            self.watchdog.step(label, message.step, now)

    def _on_examples(self, label, message, now):
        problem, warning = self.inputs.examples(label, message.step, list(message.counts))
        self.step_problem = self.step_problem or problem
        if warning:
            self._say(f"warning: {warning}")

    def _on_fed(self, label, message, now):
        warning = self.inputs.fed(label, message.step, message.digest, len(self.rank_labels))
        if warning:
            self._say(f"warning: {warning}")

    def _on_input_end(self, label, message, now):
        if not self.step_problem:
            self.step_problem = self.inputs.input_ended(label, message.step, now)

    def _on_done(self, label, message, now):
        self.inputs.stopped.add(label)
        if not self.step_problem:
            self.step_problem = self.steps.finished(label, message.steps)
        with self._watch_lock:
            self.watchdog.ended(label, now)

    def _say(self, text):
        self.output.say(text)

    def _report(self, what, label):
        others = self.steps.others_at(label) if label else None
        self.output.report(f"{what}; {others}" if others and not self.step_problem else what, label)

    # ---- signals ----------------------------------------------------------------------------------------------
    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in previous:
            signal.signal(s, self._on_signal)
        return previous

    def _restore_signal_handlers(self, previous):
        for s, handler in (previous or {}).items():
            signal.signal(s, handler)

    def _on_signal(self, signum, frame):
        self._stopping = signum

