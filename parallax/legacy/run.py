"""`parallax.parallel_run`: the original Parallax's entry point, on this engine, for scripts written for that tool.

    sess, num_workers, worker_id, num_replicas_per_worker = parallax.parallel_run(graph, resource_info)
    results = sess.run({"loss": loss, "train": train_op}, {x: [batch]})   # one value per replica
    results["loss"][0]

Every worker runs one replica (one slot, one process), so each fed value is a list of one and each fetched leaf
comes back as a list of one. The original's configuration fields are translated (config.py, translate); where this
project's defaults differ from the original's, it says so once at start. docs/migrating.md has the details.
"""
import atexit
import os
import signal
import sys
import threading
import time

import tensorflow as tf

from parallax.config import Config, translate
from parallax.errors import CheckpointError, ConfigError, ParallaxError, ResourceSpecError
from parallax.process.protocol import current_role
from parallax.process.resource_spec import Host, ResourceSpec
from parallax.runtime.get_runner import get_runner, legacy_fields_applied

tf1 = tf.compat.v1
REPLICAS_PER_WORKER = 1
QUEUE_STOP_GRACE_S = 5  # for the queue runners' threads to end at close, before the session's close cancels them


def parallel_run(single_gpu_graph, resource_info, sync=True, parallax_config=None):
    """Distribute `single_gpu_graph` over the hosts in the file `resource_info` (the original's format: `host: 0,1`
    or `host:0,1`, device ids; a bare host, one slot per local device). Returns (session, num_workers, worker_id,
    num_replicas_per_worker). Launching (several slots) happens inside, as with get_runner."""
    config = Config() if parallax_config is None else parallax_config
    if not isinstance(config, Config):
        raise ConfigError(f"parallax_config must be a parallax.Config, not {type(config).__name__}")
    role = current_role()
    translated = translate(config)
    notes = _default_notes(config, translated.config)
    config = legacy_fields_applied(config, role, translated)
    if not sync and (config.run_option != "PS" or config.sync):
        if config.run_option != "PS":
            notes.append(f"parallax: sync=False trains asynchronously, which parallax does in PS mode only: "
                         f"run_option {config.run_option!r} becomes 'PS'")
        config = config.replace(run_option="PS", sync=False)
    if config.session_config is None:  # the original's default: ops pinned to a missing GPU run elsewhere
        config = config.replace(session_config=tf1.ConfigProto(allow_soft_placement=True))
    if role.role != "worker" and notes:
        print("\n".join(notes), file=sys.stderr, flush=True)
    runner = get_runner(single_gpu_graph, _spec(resource_info), config)
    session = ReplicaSession(runner, translated.save_checkpoint_secs)
    session.start_queue_runners(single_gpu_graph)
    if translated.export_graph_path and runner.is_chief:
        os.makedirs(translated.export_graph_path, exist_ok=True)
        tf1.train.write_graph(runner.rewritten_graph.as_graph_def(), translated.export_graph_path, "graph.pbtxt")
    atexit.register(_close_at_exit, session)  # the original's scripts never close it: the last checkpoint is written
    _exit_cleanly_on_sigterm()
    return session, runner.num_workers, runner.worker_id, REPLICAS_PER_WORKER


def _default_notes(given, translated):
    notes = []
    if translated.average_sparse is not False:
        notes.append("parallax: average_sparse=None (the original Parallax's default: False): sparse gradients are "
                     "averaged over workers like dense ones when the loss is a mean over the batch (summed when it is "
                     "a sum), so N workers compute what one device computes with N times the batch; set it to False "
                     "for the original's sum")
    if "search_partitions" not in given.legacy:
        notes.append("parallax: search_partitions=False (the original Parallax's default: True): the graph's own "
                     "partitions are kept; run_option='AUTO' searches them")
    return notes


def _exit_cleanly_on_sigterm():
    """The original's examples end by sending themselves SIGTERM (`os.system('kill %d' % os.getpid())`); end as
    at the script's end instead, so that the exit hooks write the last checkpoint."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _end_on_sigterm)


def _end_on_sigterm(*_):
    """Python runs a signal's handler at its next check, which can come long after the signal, under load even
    after the script has returned (its main thread stopped), at the first line of the exit hook: a SystemExit there
    would abort the last checkpoint, with status 0. The process is then already ending as the signal asks, so the
    signal is ignored."""
    if threading.main_thread().is_alive():
        sys.exit(0)


def _close_at_exit(session):
    """The exit hook that writes the last checkpoint. A last checkpoint that cannot be written fails the process
    (status 1, the cause printed), never a silent success."""
    try:
        session.close()
    except BaseException as e:  # at exit nothing else would report it
        error = CheckpointError(f"parallel_run's session failed to close at exit, where it writes the last "
                                f"checkpoint: {type(e).__name__}: {e}. The last steps may be missing from the "
                                f"checkpoint directory; see the cause above")
        error.__cause__ = e
        sys.excepthook(CheckpointError, error, e.__traceback__)  # a launched worker's hook reports it and exits 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def _spec(resource_info):
    if isinstance(resource_info, ResourceSpec) or not os.path.isfile(str(resource_info)):
        return resource_info  # get_runner's own forms (a -H string, spec text), or its error for a missing file
    with open(resource_info) as f:
        lines = [line.split("#", 1)[0].strip() for line in f]
    hosts = []
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        name, _, ids = line.partition(":")
        try:
            slots = tuple(int(i) for i in ids.replace(" ", "").rstrip(",").split(",")) if ids.strip() else \
                tuple(range(_local_devices()))
        except ValueError:
            raise ResourceSpecError(f"{resource_info}:{number}: {line!r} is not `host: device ids` (e.g. "
                                    f"`10.0.0.1: 0,1`) or a bare host") from None
        hosts.append(Host(name.strip(), slots))
    if not hosts:
        raise ResourceSpecError(f"{resource_info} names no host; write one `host: device ids` line per host")
    return ResourceSpec.parse("\n".join(str(h) for h in hosts), source=str(resource_info))


def _local_devices():
    """A bare host has one slot per local device: the GPUs this machine shows, or one (its CPU)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return max(len([d for d in visible.split(",") if d.strip()]), 1)
    try:
        return max(len(os.listdir("/proc/driver/nvidia/gpus")), 1)
    except OSError:
        return 1


class ReplicaSession:
    """The session parallel_run returns: feeds take one value per replica, fetched leaves come back one per
    replica; `should_stop()` turns True when the input ends."""

    def __init__(self, runner, save_checkpoint_secs=None):
        self._runner = runner
        self._save_secs = save_checkpoint_secs
        self._last_save = time.monotonic()
        self._stopped = False
        self._coordinator, self._queue_threads = None, []

    def start_queue_runners(self, graph):
        """Start the graph's queue runners (its QUEUE_RUNNERS collection) on this session, as the original's
        MonitoredTrainingSession did: a TF1 queue pipeline fills while the script trains. close() stops them."""
        if graph.get_collection(tf1.GraphKeys.QUEUE_RUNNERS):
            self._coordinator = tf1.train.Coordinator()
            with graph.as_default():  # TF looks for them in the default graph first, and warns if it has none
                self._queue_threads = tf1.train.start_queue_runners(sess=self._runner, coord=self._coordinator)

    @property
    def runner(self):
        return self._runner

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        feeds = {key: _one_replica(key, value) for key, value in (feed_dict or {}).items()}
        try:
            result = self._runner.run(fetches, feeds, options=options, run_metadata=run_metadata)
        except tf.errors.OutOfRangeError:
            self._stopped = True
            raise
        if self._save_secs and self._runner.is_chief and time.monotonic() - self._last_save >= self._save_secs:
            self._runner.save_checkpoint()
            self._last_save = time.monotonic()
        return _per_replica(result)

    def should_stop(self):
        return self._stopped or (self._coordinator is not None and self._coordinator.should_stop())

    def close(self):
        if self._coordinator is not None:
            self._coordinator.request_stop()
            try:  # a runner blocked on an empty queue is cancelled when the session closes, below
                self._coordinator.join(self._queue_threads, stop_grace_period_secs=QUEUE_STOP_GRACE_S,
                                       ignore_live_threads=True)
            finally:
                self._coordinator = None
        self._runner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _one_replica(key, value):
    if isinstance(value, (list, tuple)) and len(value) == REPLICAS_PER_WORKER:
        return value[0]
    name = getattr(key, "name", key)
    raise ParallaxError(f"parallel_run's session takes, for each fed tensor, a list with one value per replica "
                        f"({REPLICAS_PER_WORKER} per worker here): feed {{{name}: [value]}}, not a "
                        f"{type(value).__name__}")


def _per_replica(result):
    if isinstance(result, dict):
        return {k: _per_replica(v) for k, v in result.items()}
    if isinstance(result, (list, tuple)) and not hasattr(result, "_fields"):
        return type(result)(_per_replica(v) for v in result)
    return [result]
