"""parallax: run a single-device TensorFlow v1 training graph data-parallel, with the same results.

    import parallax
    ds = parallax.shard(ds)
    runner = parallax.get_runner(graph, "resource_specs/localhost.txt", parallax.Config())

`__all__` is what a user calls. The error classes are `parallax.errors`' (also importable from here, as before),
and the original Parallax's names (`parallel_run`, `log`, `partition`, its configuration classes) are
`parallax.legacy`'s, importable from here by their old spellings.

Importing parallax never imports TensorFlow, so the launcher stays instant. It does three things, and only these:
it arranges for gradient capture to be installed the moment TensorFlow is imported (or at once, if it already was:
every (variable, raw gradient) pair built afterwards is recorded in the graph); when tf_keras is installed, it
sets TF_USE_LEGACY_KERAS=1 unless the environment sets it to a value (below); and in a worker the launcher started,
it sets TF_NUM_INTRAOP_THREADS to the worker's share of its machine's cores unless the environment sets it
(process/thread_pools.py).
"""
import importlib
import importlib.util
import os

from parallax import errors
from parallax.capture import tf_hook as _tf_hook
from parallax.config import Config
from parallax.errors import ParallaxError
from parallax.process import thread_pools as _thread_pools
from parallax.process.resource_spec import Host, ResourceSpec

__version__ = "0.1.0"

_tf_hook.install_capture_when_tensorflow_loads()
_thread_pools.size_this_worker()

# From TF 2.16 on, tf.compat.v1.layers needs Keras 2, which TF takes from tf_keras when this is set (read when the
# layers are first used, so setting it here is in time; a user's own value wins, an empty one does not: TF reads it
# as unset, Keras 3). Launched workers inherit it.
if importlib.util.find_spec("tf_keras") is not None and not os.environ.get("TF_USE_LEGACY_KERAS"):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

__all__ = ["Config", "ResourceSpec", "Host", "ParallaxError", "get_runner", "Runner", "shard", "shared_input",
           "get_partitioner", "explain"]

# Names imported on first use (they import TensorFlow, or are the original Parallax's), by the module that holds them.
_LAZY = {
    "get_runner": "parallax.runtime.get_runner",
    "Runner": "parallax.runtime.runner",
    "shared_input": "parallax.analysis.shared_inputs",
    "get_partitioner": "parallax.capture.partitioner",
    "explain": "parallax.explain",
    "Explanation": "parallax.explain",
    "analyze": "parallax.analysis.graph_analysis",
    "GraphAnalysis": "parallax.analysis.graph_analysis",
    # the original Parallax's
    "parallel_run": "parallax.legacy.run",
    "log": "parallax.legacy.log",
    **{name: "parallax.legacy.config" for name in ("CheckPointConfig", "CommunicationConfig", "MPIConfig",
                                                   "ProfileConfig", "PSConfig")},
}
# Modules that are names of the API (parallax.shard(ds) and the original's parallax.shard.shard(ds), parallax.partition)
_MODULES = {"shard": "parallax.capture.shard", "partition": "parallax.legacy.partition"}


def __getattr__(name):
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif isinstance(getattr(errors, name, None), type) and issubclass(getattr(errors, name), ParallaxError):
        value = getattr(errors, name)  # the error classes' old spelling, parallax.ConfigError
    else:
        raise AttributeError(f"module 'parallax' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_MODULES))
