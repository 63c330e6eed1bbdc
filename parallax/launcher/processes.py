"""Signals to processes by id, tolerant of processes that are already gone. Imports no TensorFlow."""
import ctypes
import os
import signal


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


def terminate_when_parent_dies(launcher_pid):
    """Even a SIGKILLed launcher takes its job down: each child gets SIGTERM when the launcher dies (Linux
    PR_SET_PDEATHSIG; mpirun then stops its ranks, and a remote agent sees its ssh connection close). Children are
    started from the main thread, whose exit is what the kernel watches."""
    def preexec():
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return  # not Linux: teardown relies on the launcher alone
        if os.getppid() != launcher_pid:  # the launcher died before prctl took effect
            os._exit(1)
    return preexec


def descendants(pid):
    """`pid` and every process below it (from /proc's children lists; processes that end meanwhile are skipped)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found
