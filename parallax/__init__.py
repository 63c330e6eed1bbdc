"""parallax: run a single-device TensorFlow v1 training graph data-parallel, with the same results.

    import parallax
    ds = parallax.shard(ds)
    runner = parallax.get_runner(graph, "resource_specs/localhost.txt", parallax.Config())

Importing parallax is cheap and never imports TensorFlow by itself, so the launcher stays instant. It arranges for
gradient capture to be installed the moment TensorFlow is imported (or at once, if it already was): every
(variable, raw gradient) pair built afterwards is recorded in the graph.
"""
import importlib
import importlib.util
import logging
import os

from parallax.capture import tf_hook as _tf_hook
from parallax.config import Config
from parallax.errors import (CheckpointError, CollectiveError, ConfigError, FetchNotFoundError, GraphAnalysisError,
                             GraphMismatchError, LaunchError, NoTrainOpError, ParallaxError, ResourceSpecError,
                             UnsupportedError)
from parallax.process.resource_spec import Host, ResourceSpec
from parallax.legacy.config import CheckPointConfig, CommunicationConfig, MPIConfig, ProfileConfig, PSConfig

__version__ = "0.1.0"

_tf_hook.install_capture_when_tensorflow_loads()

# From TF 2.16 on, tf.compat.v1.layers needs Keras 2, which TF takes from tf_keras when this is set (read when the
# layers are first used, so setting it here is in time; a user's own value wins). Launched workers inherit it.
if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# TensorFlow-dependent API, imported on first use.
_LAZY = {
    "analyze": "parallax.analysis.graph_analysis",
    "GraphAnalysis": "parallax.analysis.graph_analysis",
    "get_runner": "parallax.runtime.startup",
    "Runner": "parallax.runtime.runner",
    "parallel_run": "parallax.legacy.run",
    "get_partitioner": "parallax.capture.partitioner",
    "explain": "parallax.explain",
    "Explanation": "parallax.explain",
    "shared_input": "parallax.analysis.shared_inputs",
}

# Modules of the API, by the original Parallax's spelling (parallax.shard.shard(ds), parallax.partition...)
_MODULES = {"shard": "parallax.capture.shard", "partition": "parallax.legacy.partition"}

# The original Parallax's logger, which its scripts use (`parallax.log.info(...)`).
log = logging.getLogger("PARALLAX")
if not log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s PARALLAX %(levelname)s %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)
    log.propagate = False

__all__ = ["Config", "ResourceSpec", "Host", "ParallaxError", "ConfigError", "ResourceSpecError",
           "GraphAnalysisError", "NoTrainOpError", "FetchNotFoundError", "UnsupportedError", "LaunchError",
           "GraphMismatchError", "CollectiveError", "CheckpointError", "CheckPointConfig", "CommunicationConfig",
           "MPIConfig", "ProfileConfig", "PSConfig", "log", "shard", "partition", *_LAZY]


def __getattr__(name):
    if name in _MODULES:  # modules; shard is also callable: parallax.shard(ds), .shard.shard(ds)
        return importlib.import_module(_MODULES[name])
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'parallax' has no attribute {name!r}")
