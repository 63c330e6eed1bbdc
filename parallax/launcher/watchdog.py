"""The launcher's watchdog: which processes went silent, and whether the workers' synchronized steps still advance.
Plain Python, fed by the supervisor; it keeps no clock of its own (every call gets `now`), so tests drive it.

Two signs, from what every launched process already sends through mpirun and ssh:
- silence: every process (worker or server) sends a heartbeat line every few seconds from a thread of its own
  (role.py). One that sends nothing is stopped, swapped out, hung as a whole, or cut off from the launcher; it is
  named, whatever the others are doing.
- no progress: the workers report each synchronized step they start. When none starts one, the workers behind the
  furthest one are named (the others wait for them in a collective or at the step barrier); when all are in the
  same step and all beat, the step itself is stuck, and every worker's place is said.

Graph building, initialization and a large checkpoint restore do not end the job: the progress sign is armed once
every worker has started its first synchronized step, and a process that is busy, however long, still beats. But
a worker that has not started its first step `warning_s` after another did is named, once (the others wait for it
in step 1; a worker stuck there while it beats, as one was in CI, left the job silent before). The first
step itself is watched like any other (a step that waits forever for a worker that will never send its part is
stuck whether or not it is the first); its message says that a first step may compile, and it ends the job only
after FIRST_STEP_TIMEOUT_FLOOR_S at least; so does a process's silence before its first step. Each sign warns
after `warning_s` and ends the job after `timeout_s` (0 turns either off).
"""

# A first step (graph partitioning, a collective group forming, a compilation) ends the job no sooner than this,
# however short stall_timeout_s is; a later step that takes that long has stalled.
FIRST_STEP_TIMEOUT_FLOOR_S = 120.0


class Watchdog:
    def __init__(self, workers, warning_s, timeout_s):
        self.workers = list(workers)
        self.warning_s, self.timeout_s = warning_s, timeout_s
        self._heard = {}  # process -> when it last sent a line (from when it is up)
        self._step = {}  # worker -> the last synchronized step it started
        self._ended = set()  # processes that finished or exited
        self._progress_at = None  # when a worker last started a step, once the progress sign is armed
        self._first_at = None  # when the first worker started its first step
        self._warned = {}  # what was warned about -> when it began
        self._recovered = []  # lines about warned stalls that ended (a stopped process was continued)

    # ---- what the supervisor tells it -------------------------------------------------------------------------
    def up(self, label, now):
        """`label` registered: its heartbeats begin, and so does its silence clock (before, the start-up timeout
        covers it: its script may import and build for a long time before it calls get_runner)."""
        if label not in self._ended:
            self._heard[label] = now

    def heard(self, label, now):
        """Any line from `label`."""
        if label in self._heard:
            self._heard[label] = now
            self._back(("silent", label), now, f"{label} is heard again")

    def step(self, label, step, now):
        self._step[label] = step
        self._first_at = now if self._first_at is None else self._first_at
        self.heard(label, now)
        self._arm_or_advance(now)

    def ended(self, label, now):
        """`label` finished its steps, or exited: silence is what it owes from now on."""
        self._ended.add(label)
        self._heard.pop(label, None)
        self._arm_or_advance(now)

    def _arm_or_advance(self, now):
        running = [w for w in self.workers if w not in self._ended]
        if self._progress_at is not None or all(self._step.get(w, 0) >= 1 for w in running):
            self._progress_at = now
            self._back(("progress",), now, "the workers' steps advance again")
            self._back(("late",), now, "every worker has started its steps")

    # ---- what it says -----------------------------------------------------------------------------------------
    def check(self, now):
        """(lines to print now, the failure that ends the job or None). A failure is (message, process to show)."""
        notes, failure = self._recovered, None
        self._recovered = []
        for label, last in sorted(self._heard.items()):
            quiet = now - last
            verdict = self._judge(("silent", label), quiet, now, notes, lambda: self._silent(label, quiet),
                                  self._starting(label))
            failure = failure or (verdict and (verdict, label))
        silent = any(key[0] == "silent" for key in self._warned)  # which explains the lack of progress
        late = [w for w in self.workers if w not in self._ended and w not in self._step]
        if self._progress_at is None and self._first_at is not None and late and not failure and not silent and \
                self.warning_s and now - self._first_at >= self.warning_s and ("late",) not in self._warned:
            self._warned[("late",)] = self._first_at
            notes.append(f"stall: {', '.join(late)} {'has' if len(late) == 1 else 'have'} not started a "
                         f"synchronized step {now - self._first_at:.0f} s after the first worker started step 1, "
                         f"where the others wait (building the graph, initializing or restoring a checkpoint may "
                         f"take this long; the job does not end for it, so stop it if it never starts)")
        if self._progress_at is not None and not failure and not silent:
            still = now - self._progress_at
            verdict = self._judge(("progress",), still, now, notes, lambda: self._stuck(still), self._first_step())
            failure = verdict and (verdict, (self._behind() or [None])[0])
        return notes, failure

    def _judge(self, key, quiet, now, notes, describe, first_step=False):
        timeout = max(self.timeout_s, FIRST_STEP_TIMEOUT_FLOOR_S) if first_step and self.timeout_s else self.timeout_s
        if timeout and quiet >= timeout:
            if timeout != self.timeout_s:
                return (f"{describe()}; ended after {timeout:g} s, a first step's least "
                        f"(stall_timeout_s={self.timeout_s:g})")
            return f"{describe()}; ended after stall_timeout_s={self.timeout_s:g}"
        if self.warning_s and quiet >= self.warning_s and key not in self._warned:
            self._warned[key] = now - quiet
            later = f"; the job ends if this lasts {timeout:g} s (stall_timeout_s)" if timeout else ""
            notes.append(f"stall: {describe()}{later}")
        return None

    def _starting(self, label):
        """Before its first synchronized step (a server: before any worker's), a process may be held up by what
        its line to the launcher shares with start-up (MPI's wire-up on its host: CI once saw both workers of one
        host silent for 11 s there): its silence ends the job no sooner than a first step's."""
        return label not in self._step if label in self.workers else not self._step

    def _first_step(self):
        return max((self._step.get(w, 0) for w in self.workers if w not in self._ended), default=0) <= 1

    def _back(self, key, now, text):
        began = self._warned.pop(key, None)
        if began is not None:
            self._recovered.append(f"{text} after {now - began:.0f} s")

    def _silent(self, label, quiet):
        if label in self.workers:
            where = f" (its last synchronized step: {self._step[label]}" if label in self._step else " (before its " \
                "first synchronized step"
            furthest = max(self._step.values(), default=0)
            where += f"; the furthest worker is in step {furthest})" if furthest else ")"
        else:
            where = " (a parameter server: every worker's step waits on it)"
        return f"{label} has sent nothing for {quiet:.0f} s{where}: it is stopped, hung, or cut off from the launcher"

    def _behind(self):
        running = [w for w in self.workers if w not in self._ended]
        furthest = max((self._step.get(w, 0) for w in running), default=0)
        return [w for w in running if self._step.get(w, 0) < furthest]

    def _stuck(self, still):
        running = [w for w in self.workers if w not in self._ended]
        furthest = max((self._step.get(w, 0) for w in running), default=0)
        behind = self._behind()
        if behind:
            places = ", ".join(f"{w} (in step {self._step.get(w, 0)})" for w in behind)
            return (f"no synchronized step started for {still:.0f} s: {places} "
                    f"{'has' if len(behind) == 1 else 'have'} not reached step {furthest}, where the others wait")
        first = " (the first: if it compiles or restores for longer, raise stall_timeout_s)" if furthest == 1 else ""
        return (f"no synchronized step started for {still:.0f} s: every running worker is in step {furthest}{first} "
                f"and every process still beats, so the step itself is stuck (a collective, a parameter server, or "
                f"the script's own code)")
