"""Signals to processes by id, tolerant of processes that are already gone. Imports no TensorFlow."""
import os


def signal_process(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_group(pid, sig):
    """Signal the process group led by `pid` (processes started with start_new_session lead their own)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_process_and_group(pid, sig):
    """The whole group if `pid` leads one, else just the process."""
    try:
        leads = os.getpgid(pid) == pid
    except (ProcessLookupError, PermissionError):
        leads = False
    (signal_group if leads else signal_process)(pid, sig)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not running: it only waits for its parent to reap it
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
