"""TensorFlow's own log lines, as a job's processes print them: the same notes at import in every process
(oneDNN's, the CPU's, CUDA's absence) and, on TF 2.21 with TF's collectives, a warning that a step's rendezvous was
cleaned up (`local_rendezvous.cc:412] Local rendezvous is aborting with status: ABORTED: Cleanup 1300...`) many
times a job, which users read as failures. The launcher gives its processes TF_CPP_MIN_LOG_LEVEL=1 unless the user
set a level, but TF 2.21 logs through absl, which writes everything to stderr until its log is initialized, whatever
that level says. So the console shows the first line of each of TF's INFO statements once per job, and each of its
WARNING lines once per job as well: a warning is the same when its statement and its text but for numbers (ids,
counters) are. The first warning hidden of each statement is said once, so nothing is hidden silently. A process's
log file (--log-dir) keeps every line, and TF's errors and every other line always pass. Plain Python."""
import re
import threading

# TF 2.15's format (`2026-12-04 20:22:41.090198: I tensorflow/core/util/port.cc:113] ...`) and absl's in TF 2.21
# (`I0000 00:00:1796413426.284160    3515 port.cc:153] ...`); the groups: the level, the statement's place in TF's
# source, the text.
_LOG = re.compile(r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IW]) |([IW])\d{4} \d\d:\d\d:[\d.]+ +\d+ )(\S+:\d+)\] (.*)")
_ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_NUMBER = re.compile(r"\d+")


class TFNotes:
    """The TF INFO statements and WARNING lines a job's console has shown."""

    def __init__(self):
        self._shown = set()
        self._said = set()  # the warning statements whose repeats this job has said it hides
        self._lock = threading.Lock()  # each process's output is read by a thread of its own

    def repeated(self, line):
        """Whether `line` is one of TF's INFO lines (or absl's notice) whose statement this job has shown, or one
        of its WARNING lines that this job has shown but for its numbers; the first of each is recorded and
        passes."""
        key = self._key(line)
        if key is None:
            return False
        with self._lock:
            if key in self._shown:
                return True
            self._shown.add(key)
            return False

    def hidden_note(self, line):
        """For the first repeat of each of TF's warning statements that `repeated` hides, a sentence that says so;
        else None."""
        match = _LOG.match(line)
        if not match or (match.group(1) or match.group(2)) != "W":
            return None
        with self._lock:
            if match.group(3) in self._said:
                return None
            self._said.add(match.group(3))
        return (f"TensorFlow repeats its warning at {match.group(3)} ({match.group(4)[:80]}...); the console shows "
                f"each such line once per job (--log-dir keeps every line of every process)")

    @staticmethod
    def _key(line):
        match = _LOG.match(line)
        if match is None:
            return line if line == _ABSL_NOTICE else None
        level, place, text = match.group(1) or match.group(2), match.group(3), match.group(4)
        return place if level == "I" else (place, _NUMBER.sub("N", text))
