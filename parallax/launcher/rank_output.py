"""mpirun's output read back: whole lines per rank (--tag-output), and the rank that failed and how it ended, from
mpirun's report or spawn.describe_end's words for it. Plain Python."""
import collections
import re
import signal

_TAG = re.compile(r"\[\d+,(\d+)\]<(stdout|stderr)>:")
_FAILED_RANK = (re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]"), re.compile(r"process rank (\d+) with PID"))
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
_EXIT_SIGNAL = re.compile(r"exited on signal (\d+)")


def describe_exit(code):
    """How a process with exit status `code` ended, in words (a negative code: the signal that killed it)."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "?"
        return f"was killed by signal {-code} ({name})"
    if code == 255:
        return "lost its ssh connection (ssh exit status 255)"
    return f"exited with code {code}"


def lines_of(popen):
    """`popen`'s stdout, line by line, as text, until it closes."""
    for raw in iter(popen.stdout.readline, b""):
        yield raw.decode(errors="replace").rstrip("\n")


def failed_rank(text):
    """(rank, how it ended) of the first failed rank in mpirun's output, or None; how it ended may be None."""
    rank = next((int(m.group(1)) for m in (p.search(text) for p in _FAILED_RANK) if m), None)
    if rank is None:
        return None
    m_sig, m_code = _EXIT_SIGNAL.search(text), _EXIT_CODE.search(text)
    return rank, (describe_exit(-int(m_sig.group(1))) if m_sig else
                  describe_exit(int(m_code.group(1))) if m_code else None)


class RankLines:
    """Whole lines per rank from mpirun's --tag-output. mpirun tags every write of a rank's stdout or stderr, so
    one line may come in pieces, and a piece of a rank's stderr (a control line) may sit in the middle of a piece
    of its stdout: pieces are joined per rank *and stream*, or a user's line would be glued to a control line (and
    hidden with it)."""

    def __init__(self):
        self._partial = collections.defaultdict(str)

    def feed(self, line):
        """The (rank, text) lines that `line` (one line of mpirun's output) completes; rank None: mpirun's own."""
        pieces = _TAG.split(line)
        if len(pieces) == 1:
            return [(None, line)]
        out = [(None, pieces[0])] if pieces[0].strip() else []
        segments = [((int(r), stream), text) for r, stream, text in zip(pieces[1::3], pieces[2::3], pieces[3::3])]
        for key, text in segments[:-1]:
            self._partial[key] += text
        key, text = segments[-1]
        out.append((key[0], self._partial.pop(key, "") + text))
        return out

    def rest(self):
        """Pieces that never got their end of line (a rank that died mid-line)."""
        rest = [(rank, text) for (rank, _), text in self._partial.items()]
        self._partial.clear()
        return rest

