"""The control lines a job's processes write for their launcher: one module writes and parses them.

A control line travels with its process's output (through mpirun and ssh, so it reaches the launcher from any host)
as `parallax-control: <verb> <fields>`; the supervisor reads it and hides it. Each verb is a record here: `text()`
is what follows the prefix, `parse` gives back the record. A line with the prefix that this version cannot read
parses to None, and is hidden all the same. Plain Python.
"""
import dataclasses
from typing import Tuple

PREFIX = "parallax-control:"


@dataclasses.dataclass(frozen=True)
class Up:
    """The process is up (get_runner registered it; a server started)."""
    host: str
    pid: int

    def text(self):
        return f"up {self.host} {self.pid}"


@dataclasses.dataclass(frozen=True)
class Alive:
    """A heartbeat: the process still runs (the watchdog tells silent from slow by it)."""

    def text(self):
        return "alive"


@dataclasses.dataclass(frozen=True)
class Serving:
    """A parameter server listens."""

    def text(self):
        return "serving"


@dataclasses.dataclass(frozen=True)
class Failed:
    """The process failed with `what` (its exception's type and first line) at `time` (seconds since the epoch)."""
    time: float
    what: str

    def text(self):
        return f"failed {self.time:.6f} {self.what}"


@dataclasses.dataclass(frozen=True)
class Exit:
    """A worker ended with Popen's status `code` (-N for signal N), written by whoever started it."""
    code: int

    def text(self):
        return f"exit {self.code}"


@dataclasses.dataclass(frozen=True)
class Step:
    """A worker starts synchronized step `step` of the fetch set `name` (whose digest every worker must share)."""
    step: int
    digest: str
    name: str

    def text(self):
        return f"step {self.step} {self.digest} {self.name}"


@dataclasses.dataclass(frozen=True)
class Examples:
    """The examples each input yielded in a worker's synchronized step."""
    step: int
    counts: Tuple[int, ...]

    def text(self):
        return f"examples {self.step} {','.join(str(n) for n in self.counts)}"


@dataclasses.dataclass(frozen=True)
class Fed:
    """The digest of the batch a worker fed in its first fed step."""
    step: int
    digest: str

    def text(self):
        return f"fed {self.step} {self.digest}"


@dataclasses.dataclass(frozen=True)
class InputEnd:
    """A worker's input ended in synchronized step `step`."""
    step: int

    def text(self):
        return f"input-end {self.step}"


@dataclasses.dataclass(frozen=True)
class Done:
    """A worker's Runner closed after `steps` synchronized steps."""
    steps: int

    def text(self):
        return f"done {self.steps}"


def line(message):
    """The whole control line of `message`."""
    return f"{PREFIX} {message.text()}"


def is_control(text):
    return text.startswith(PREFIX)


def parse(text):
    """The record a control line holds, or None (not a control line, or one this version cannot read)."""
    if not is_control(text):
        return None
    verb, *rest = text[len(PREFIX):].split(None, 2) or [""]
    reader = _READERS.get(verb)
    try:
        return reader(rest) if reader else None
    except (ValueError, IndexError):
        return None


def _step(fields):
    digest, _, name = fields[1].partition(" ")
    return Step(int(fields[0]), digest, name)


def _exactly(count, make):
    def read(fields):
        if len(fields) != count:
            raise ValueError(f"{count} fields expected")
        return make(fields)
    return read


_READERS = {
    "up": lambda f: Up(f[0] if f else "", int(f[1].split()[0]) if len(f) > 1 else 0),
    "alive": lambda f: Alive(),
    "serving": lambda f: Serving(),
    "failed": _exactly(2, lambda f: Failed(float(f[0]), f[1])),
    "exit": _exactly(1, lambda f: Exit(int(f[0]))),
    "step": _exactly(2, _step),
    "examples": _exactly(2, lambda f: Examples(int(f[0]), tuple(int(n) for n in f[1].split(",")))),
    "fed": _exactly(2, lambda f: Fed(int(f[0]), f[1])),
    "input-end": _exactly(1, lambda f: InputEnd(int(f[0]))),
    "done": _exactly(1, lambda f: Done(int(f[0]))),
}
