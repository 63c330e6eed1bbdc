"""Where each line of a job's output goes: a process's lines to the console tagged with its label (or to its log
file under --log-dir), with its last lines kept for a failure's report; mpirun's own lines; parallax's notes on
stderr. Control lines never come here: the supervisor reads them (control_lines.py)."""
import collections
import os
import re
import sys
import threading

from parallax.launcher.tf_notes import TFNotes

TAIL_LINES = 20
# mpirun's ssh child may exec before mpirun moves it into a process group (EACCES): a harmless race.
_HARMLESS = re.compile(r"plm:rsh: Warning: setpgid\(\d+,\d+\) failed in parent with errno=Permission denied")


class OutputRouter:
    def __init__(self, out, log_dir, main_label):
        self.out, self.log_dir, self.main_label = out, log_dir, main_label
        self.tails = collections.defaultdict(lambda: collections.deque(maxlen=TAIL_LINES))
        self.launcher_lines = collections.deque(maxlen=200)
        self._files = {}
        self._tf_notes = TFNotes()  # TF's INFO and WARNING lines shown on the console, once per job
        self._lock = threading.Lock()

    def process_line(self, label, text):
        self.tails[label].append(text)
        if self.log_dir:
            self._log_file(label).write(text + "\n")
        elif not self._tf_notes.repeated(text):
            self.write(f"[{label}] {text}")
        else:
            note = self._tf_notes.hidden_note(text)
            if note:
                self.say(note)

    def launcher_line(self, line):
        self.launcher_lines.append(line)
        if line.strip() and not set(line.strip()) <= {"-"} and not _HARMLESS.search(line):
            self.write(f"[{self.main_label}] {line}")

    def write(self, text):
        with self._lock:
            self.out.write(text + "\n")
            self.out.flush()

    @staticmethod
    def say(text):
        sys.stderr.write(f"parallax: {text}\n")
        sys.stderr.flush()

    def report(self, what, label):
        """A failed job's report: what failed, and the last lines of the process it names (mpirun's without one)."""
        lines = list(self.tails.get(label, [])) if label else list(self.launcher_lines)[-TAIL_LINES:]
        tail = "\n".join("    " + t for t in lines) or "    (no output)"
        where = f" (full log: {self.log_path(label)})" if self.log_dir and label else ""
        self.say(f"job failed: {what}; every process was stopped.\n  last lines of {label or 'mpirun'}"
                 f"{where}:\n{tail}")

    def log_path(self, label):
        host, role, index = label.split("/")
        return os.path.join(self.log_dir, f"{role}.{index}.{host}.log")

    def _log_file(self, label):
        if label not in self._files:
            os.makedirs(self.log_dir, exist_ok=True)
            self._files[label] = open(self.log_path(label), "a", buffering=1)
        return self._files[label]

    def close(self):
        for f in self._files.values():
            f.close()
