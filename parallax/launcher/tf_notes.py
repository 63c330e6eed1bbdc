"""TensorFlow's own INFO lines, as a job's processes print them: the same notes at import in every process
(oneDNN's, the CPU's, CUDA's absence) and, on TF 2.21 with TF's collectives, a rendezvous note after every step.
The launcher gives its processes TF_CPP_MIN_LOG_LEVEL=1 unless the user set a level, but TF 2.21 logs through
absl, which writes everything to stderr until its log is initialized, whatever that level says. So the console
shows the first line of each of TF's INFO log statements once per job; a process's log file (--log-dir) keeps
them all, and TF's warnings and errors always pass. Plain Python."""
import re
import threading

# TF 2.15's format (`2026-12-04 20:22:41.090198: I tensorflow/core/util/port.cc:113] ...`) and absl's in TF 2.21
# (`I0000 00:00:1796413426.284160    3515 port.cc:153] ...`); the group is the statement's place in TF's source.
_INFO = re.compile(r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: I |I\d{4} \d\d:\d\d:[\d.]+ +\d+ )(\S+:\d+)\] ")
_ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


class TFNotes:
    """The TF INFO statements a job's console has shown."""

    def __init__(self):
        self._shown = set()
        self._lock = threading.Lock()  # each process's output is read by a thread of its own

    def repeated(self, line):
        """Whether `line` is one of TF's INFO lines (or absl's notice) whose statement this job has shown; the
        first of each is recorded and passes."""
        match = _INFO.match(line)
        place = match.group(1) if match else line if line == _ABSL_NOTICE else None
        if place is None:
            return False
        with self._lock:
            if place in self._shown:
                return True
            self._shown.add(place)
            return False
