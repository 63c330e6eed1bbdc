"""Which synchronized step each worker is in, from their control lines, and the first disagreement. Plain Python.

Every worker must run the same sequence of synchronized steps (docs/modes.md). A worker that runs another fetch
at step n, or stops while others go on, leaves the others blocked in a collective or at the step barrier: the
supervisor ends the job with the message this ledger gives, naming the step and the workers, instead of hanging.
"""
import collections

WINDOW = 64  # steps remembered per worker: workers stay within one step of each other at every barrier


class StepLedger:
    def __init__(self):
        self._steps = collections.defaultdict(collections.OrderedDict)  # worker -> {step: (digest, fetch name)}
        self._last = {}  # worker -> the last step it started
        self._done = {}  # worker -> how many synchronized steps it ran before it stopped

    def started(self, worker, step, digest, name):
        """Worker `worker` starts synchronized step `step` (1-based). Returns a problem message, or None."""
        steps = self._steps[worker]
        steps[step] = (digest, name)
        while len(steps) > WINDOW:
            steps.popitem(last=False)
        self._last[worker] = step
        for other, theirs in sorted(self._steps.items()):
            if other != worker and step in theirs and theirs[step][0] != digest:
                return (f"at synchronized step {step}, {other} runs {theirs[step][1]} but {worker} runs {name}: every "
                        f"worker must run the same sequence of synchronized steps (fetch the same train ops, in "
                        f"the same order)")
        for other, ran in sorted(self._done.items()):
            if step > ran:
                return self._early(other, ran, worker, step)
        return None

    def finished(self, worker, ran):
        """Worker `worker` stopped after `ran` synchronized steps. Returns a problem message, or None."""
        self._done[worker] = ran
        for other, last in sorted(self._last.items()):
            if other != worker and other not in self._done and last > ran:
                return self._early(worker, ran, other, last)
        return None

    def others_at(self, failed):
        """Where the workers still running, other than `failed`, were: their synchronized step and its fetch set
        (its collectives or barrier need every worker), or None when none had started one."""
        places = [f"{w} was in synchronized step {last} ({self._steps[w][last][1]})"
                  for w, last in sorted(self._last.items()) if w != failed and w not in self._done]
        return "; ".join(places) + ", whose collectives and barriers need every worker" if places else None

    @staticmethod
    def _early(stopped, ran, waiting, step):
        return (f"{stopped} stopped after {ran} synchronized steps while {waiting} waits in step {step}: every worker "
                f"must run the same number of synchronized steps")
