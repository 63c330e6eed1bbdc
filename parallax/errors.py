"""Every error parallax raises on purpose is a ParallaxError; the message says what to fix."""
import os
import sys


class ParallaxError(Exception):
    """Base class of all parallax errors."""


class ConfigError(ParallaxError, ValueError):
    """A `parallax.Config` field has a bad value."""


class ResourceSpecError(ParallaxError, ValueError):
    """A resource spec cannot be parsed or is inconsistent."""


class GraphAnalysisError(ParallaxError):
    """The user's graph cannot be analyzed (for example, it has no training update op)."""


class GraphCycleError(GraphAnalysisError):
    """The graph has a cycle that is not a v1 while loop's back edge: TF would refuse to run it."""

    def __init__(self, cycle):
        shown = " -> ".join(cycle[:24]) + (" -> ..." if len(cycle) > 24 else "")
        super().__init__(f"the graph has a cycle outside any while loop ({len(cycle)} nodes, each reading the "
                         f"next's output or waiting on it): {shown} -> {cycle[0]}")
        self.cycle = cycle


class NoTrainOpError(GraphAnalysisError):
    """The graph has no optimizer update for any trainable variable."""


class FetchNotFoundError(ParallaxError, KeyError):
    """A fetch or feed passed to `Runner.run` does not exist in the graph given to `get_runner`."""

    def __str__(self):  # KeyError would print the message with quotes around it
        return str(self.args[0]) if self.args else ""


class UnsupportedError(ParallaxError):
    """A request that this version of parallax does not support."""


class LaunchError(ParallaxError):
    """A worker or server process could not be started, or failed."""


class GraphMismatchError(ParallaxError):
    """Workers built different rewritten graphs."""


class PipelineError(ParallaxError):
    """The rewrite passes' contracts do not hold: a pass runs before what it requires, or breaks what it promised."""


class RewritePassError(PipelineError):
    """A rewrite pass failed on this graph with an error of its own (not a ParallaxError): a parallax bug, named by
    the pass; the original exception is its __cause__."""


class CollectiveError(ParallaxError):
    """A collective did not complete: another worker failed, stopped or left the job before it."""


class CheckError(ParallaxError):
    """Config.check_steps: the job's first steps are not one device's with the global batch (step_check.py)."""


class CheckpointError(ParallaxError):
    """A checkpoint could not be written or restored."""


def one_line(exc):
    """How an uncaught ParallaxError is printed: its type and message, without a traceback (it is the user's
    mistake, or a job's failure, that the message explains)."""
    return f"parallax: error: {type(exc).__name__}: {exc}"


def print_uncaught(exc_type, exc, tb, print_traceback):
    """Print an exception that ends the process: a ParallaxError as `one_line` (PARALLAX_TRACEBACK=1: its
    traceback instead), any other with `print_traceback` (an exception hook)."""
    if isinstance(exc, ParallaxError) and os.environ.get("PARALLAX_TRACEBACK") != "1":
        print(one_line(exc), file=sys.stderr, flush=True)
    else:
        print_traceback(exc_type, exc, tb)


def report_if_uncaught(exc):
    """If `exc` ends the process uncaught, print it by `print_uncaught`. Called as a ParallaxError leaves parallax's
    entry points; any other exception, or this one caught by the script, is untouched."""
    previous = sys.excepthook

    def hook(exc_type, value, tb):
        if value is exc:
            print_uncaught(exc_type, value, tb, previous)
        else:
            previous(exc_type, value, tb)
    sys.excepthook = hook
