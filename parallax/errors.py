"""Every error parallax raises on purpose is a ParallaxError; the message says what to fix."""


class ParallaxError(Exception):
    """Base class of all parallax errors."""


class ConfigError(ParallaxError, ValueError):
    """A `parallax.Config` field has a bad value."""


class ResourceSpecError(ParallaxError, ValueError):
    """A resource spec cannot be parsed or is inconsistent."""


class GraphAnalysisError(ParallaxError):
    """The user's graph cannot be analyzed (for example, it has no training update op)."""


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


class CollectiveError(ParallaxError):
    """A collective did not complete: another worker failed, stopped or left the job before it."""


class CheckpointError(ParallaxError):
    """A checkpoint could not be written or restored."""


def one_line(exc):
    """How an uncaught ParallaxError is printed: its type and message, without a traceback (it is the user's
    mistake, or a job's failure, that the message explains; PARALLAX_TRACEBACK=1 prints the traceback too)."""
    return f"parallax: error: {type(exc).__name__}: {exc}"


def report_if_uncaught(exc):
    """If `exc` ends the process uncaught, print `one_line(exc)` instead of its traceback. Called as a ParallaxError
    leaves parallax's entry points; any other exception, or this one caught by the script, is untouched."""
    import os
    import sys
    if os.environ.get("PARALLAX_TRACEBACK") == "1":
        return
    previous = sys.excepthook

    def hook(exc_type, value, tb):
        if value is exc:
            print(one_line(exc), file=sys.stderr, flush=True)
        else:
            previous(exc_type, value, tb)
    sys.excepthook = hook
