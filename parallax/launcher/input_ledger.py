"""Whether the workers' inputs kept in step: each synchronized step's count of examples per worker, and the step in
which each worker's input ended. Plain Python, fed by the supervisor; it keeps no clock of its own.

The workers' k-th batches are one device's k-th batch only while each worker has its equal share
(parallax/rules/example_counts.py). Two things break that at the end of the data, when its size is not a multiple of N*b:
- the workers' last batches hold different numbers of examples: the job goes on, and the launcher warns, naming
  the step, because that step is not exactly one device's;
- one worker's input ends a step before another's: the others wait in that step for a worker that will never send
  its part, so the job ends, and the message says why and what to change (rather than the collective error or the
  stall that follows).
"""
import collections

WINDOW = 64  # steps remembered per worker, as in step_ledger.py
STRANDED_S = 15.0  # after one worker's input ended, how long another may stay in that step without a word
MAX_WARNINGS = 3  # steps with differing batches that are named; the last named says later ones are not

FIX = ("give every worker the same number of equal batches: batch(b, drop_remainder=True), a dataset whose size is a "
       "multiple of N*b, or a repeat() of the dataset with a fixed number of steps")


class InputLedger:
    def __init__(self):
        self._counts = collections.defaultdict(collections.OrderedDict)  # worker -> {step: counts}
        self._ends = collections.defaultdict(dict)  # worker -> {step its input ended in: when it was heard}
        self._last = {}  # worker -> the last synchronized step it started
        self._warned_steps = set()  # steps whose batches differed (named up to MAX_WARNINGS)
        self.stopped = set()  # workers that finished or failed: nothing is owed by them any more
        self._fed = {}  # worker -> (step, digest of its fed batch), from its first synchronized step with feeds

    def started(self, worker, step):
        """Returns a problem message when `worker` went past a step in which another worker's input ended."""
        self._last[worker] = step
        done = step - 1  # a worker starts a step once it ran the one before, or its input ended there
        for other, ends in sorted(self._ends.items()):
            if other != worker and done in ends and done not in self._ends[worker]:
                return self._uneven_end(other, done, worker)
        return None

    def examples(self, worker, step, counts):
        """`worker` ran synchronized step `step` on `counts` examples (one per input). Returns (problem, warning)."""
        mine = self._counts[worker]
        mine[step] = tuple(counts)
        while len(mine) > WINDOW:
            mine.popitem(last=False)
        for other, ends in sorted(self._ends.items()):
            if other != worker and step in ends:
                return self._uneven_end(other, step, worker), None
        theirs = {w: c[step] for w, c in self._counts.items() if step in c}
        if len(set(theirs.values())) <= 1 or step in self._warned_steps:
            return None, None
        self._warned_steps.add(step)
        return None, self._warning(step, theirs)

    def input_ended(self, worker, step, now):
        """`worker`'s input ended in synchronized step `step`. Returns a problem message when another worker had a
        batch in that step."""
        ends = self._ends[worker]
        ends[step] = now
        for old in [s for s in ends if s < step - WINDOW]:
            del ends[old]
        for other in sorted(self._last):
            if other == worker or step in self._ends[other]:
                continue
            if step in self._counts[other] or self._last[other] > step:
                return self._uneven_end(worker, step, other)
        return None

    def stranded(self, now):
        """A problem message when a worker's input ended in a step more than STRANDED_S ago, and another worker is
        still in that step without its input having ended (it waits for the first one's part), else None."""
        for worker, ends in sorted(self._ends.items()):
            for step, when in ends.items():
                if now - when < STRANDED_S:
                    continue
                for other, last in sorted(self._last.items()):
                    if other != worker and other not in self.stopped and last == step and \
                            step not in self._ends[other]:
                        return self._uneven_end(worker, step, other)
        return None

    def behind(self, failed):
        """Why `failed` failed, when it was in a step in which another worker's input had ended: the uneven end of
        the data, of which its collective error is a consequence. None otherwise."""
        step = self._last.get(failed)
        for worker, ends in sorted(self._ends.items()):
            if worker != failed and step in ends and step not in self._ends[failed]:
                return self._uneven_end(worker, step, failed)
        return None

    def _warning(self, step, theirs):
        if len(self._warned_steps) > MAX_WARNINGS:
            return None
        shown = ", ".join(f"{w}: {'+'.join(str(n) for n in c)}" for w, c in sorted(theirs.items()))
        later = " (later steps like it are not named)" if len(self._warned_steps) == MAX_WARNINGS else ""
        return (f"synchronized step {step} is not exactly one device's: the workers' batches differ ({shown} "
                f"examples), and parallax combines the workers' parts as equal shares of the batch (a mean's "
                f"gradients are averaged, random draws and statistics of the batch are split and combined by "
                f"equal shares). The data's size is not a multiple of N*b, so its last batch is short; {FIX}"
                f"{later}")

    def fed(self, worker, step, digest, workers):
        """`worker` was fed a batch whose digest is `digest` in synchronized step `step`. Returns a warning once
        every one of `workers` reported the same digest for the same step: each was fed the same examples."""
        self._fed[worker] = (step, digest)
        if len(self._fed) != workers or len(set(self._fed.values())) != 1:
            return None
        self._fed = {}  # said once
        return (f"every worker was fed the same batch in synchronized step {step}: the workers train on copies of "
                f"it, which is {workers} copies of one device with batch b, not one device with batch {workers}*b "
                f"(a summed loss gets {workers} times its gradient); feed worker i rows [i*b, (i+1)*b) of the "
                f"global batch (runner.worker_id, runner.num_workers), or read a dataset through parallax.shard")

    @property
    def uneven_steps(self):
        """How many steps' batches differed between workers."""
        return len(self._warned_steps)

    @staticmethod
    def _uneven_end(ended, step, other):
        return (f"{ended}'s input ended in synchronized step {step} (OutOfRangeError) while {other}'s still had a "
                f"batch: the workers' shares of the data hold different numbers of batches, and every worker must "
                f"run the same synchronized steps; {FIX}")
