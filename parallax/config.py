"""`parallax.Config`: every knob of a job, validated when it is built and when a field is assigned. Imports no
TensorFlow.

Fields may be given as keywords or assigned after construction (the original Parallax's style); a field's own
value is checked at once, and the rules that tie fields together (checkpoint steps need a directory, traces need a
log dir) when the job starts, so that assignment order does not matter. The original Parallax's fields
(`communication_config`, `ckpt_config`, ...) are kept aside for `parallax.parallel_run` (legacy/config.py)."""
import dataclasses
from typing import Any, Dict, Optional, Tuple

from parallax.errors import ConfigError, UnsupportedError
from parallax.process.protocol import derived_stall_warning

RUN_OPTIONS = ("HYBRID", "PS", "MPI", "AUTO")
METHODS = ("AR", "AG", "PS")
COLLECTIVE_BACKENDS = ("auto", "horovod", "tf")
TRANSPORTS = ("direct", "ssh")
_FROM_THE_LOSS = ("average_dense", "average_sparse")  # None: True unless the loss is a sum (loss_law.py)
_BOOL_FIELDS = ("average_dense", "average_sparse", "local_aggregation", "place_post_aggregation_ops",
                "place_boundary_ops", "sync", "check_fails")


# The original Parallax's fields that are not Config's own; translate, below, reads them.
LEGACY_FIELDS = ("sess_config", "redirect_path", "search_partitions", "export_graph_path", "communication_config",
                 "ckpt_config", "profile_config")


@dataclasses.dataclass
class Config:
    """How parallax distributes a graph.

    The defaults make N workers of batch b compute exactly what one device computes with batch N*b:
    gradients are averaged over workers, dense and sparse alike, when the loss is a mean over the batch, and summed
    when it is a sum (average_dense/average_sparse None: decided from the loss, loss_law.py).
    """
    run_option: str = "HYBRID"
    average_dense: Optional[bool] = None
    average_sparse: Optional[bool] = None
    local_aggregation: bool = True
    place_post_aggregation_ops: bool = True
    place_boundary_ops: bool = True
    sync: bool = True
    checkpoint_dir: Optional[str] = None
    save_checkpoint_steps: Optional[int] = None
    log_dir: Optional[str] = None
    session_config: Optional[Any] = None  # a tf.compat.v1.ConfigProto
    # Training steps (1-based, as counted by each worker's Runner) to trace, and the workers that trace them; each
    # traced step is written as Chrome-trace JSON to <log_dir>/trace.worker<W>.step<S>.json (docs/profiling.md).
    profile_steps: Tuple[int, ...] = ()
    profile_workers: Tuple[int, ...] = (0,)
    # Per-variable methods that override the run option's rule, {variable name: "AR" | "AG" | "PS"}: a mixed plan
    # (e.g. one sparse variable all-gathered while another lives on a server). Names are checked against the graph.
    methods: Dict[str, str] = dataclasses.field(default_factory=dict)
    # The library of the AllReduce/AllGather collectives: "horovod", "tf" (TensorFlow's own collective ops between
    # the workers' TF servers), or "auto": Horovod when it loads here with MPI, else "tf" (parallax/collectives).
    collective_backend: str = "auto"
    # run_option="AUTO": the calibration.json that parallax-calibrate wrote (default: <log_dir>/calibration.json).
    calibration: Optional[str] = None
    # The launcher's watchdog (docs/launching.md): after stall_warning_s of silence from a process, or of no
    # synchronized step started by any worker, it says which processes the others wait for; after stall_timeout_s
    # it ends the job naming them. 0 turns either off. stall_warning_s None: 60 s, or half of stall_timeout_s when
    # that is sooner (Config.stall_warning()).
    stall_warning_s: Optional[float] = None
    stall_timeout_s: float = 600.0
    # How the job's processes reach each other's servers (docs/security.md): "direct", over the network to each
    # host's job address; "ssh": every server listens on its host's loopback only, and other hosts reach it through
    # ssh port forwarding. "ssh" covers the parameter servers and collective_backend "tf"; not MPI (nor Horovod).
    transport: str = "direct"
    # A check users run on their own script (docs/check.md): the first check_steps training steps are
    # computed again by the chief as one device computes them, on the workers' actual batches, and every variable
    # is compared. A difference fails the job (check_fails=False: warns). 0: no check.
    check_steps: int = 0
    check_fails: bool = True

    def __post_init__(self):
        object.__setattr__(self, "legacy", {})
        self._check_fields()
        self.check_combinations()

    def __setattr__(self, name, value):
        if not hasattr(self, "legacy"):  # still in __init__
            object.__setattr__(self, name, value)
        elif name in LEGACY_FIELDS:
            self.legacy[name] = value
        elif name in _FIELD_NAMES:
            old = getattr(self, name)
            object.__setattr__(self, name, tuple(value) if name in _TUPLE_FIELDS and isinstance(value, list)
                               else value)
            try:
                self._check_fields()
            except ConfigError:
                object.__setattr__(self, name, old)
                raise
        else:
            raise ConfigError(f"Config has no field {name!r}; its fields are {', '.join(_FIELD_NAMES)} (and the "
                              f"original Parallax's {', '.join(LEGACY_FIELDS)}, for parallax.parallel_run)")

    def __getattr__(self, name):  # only for names not found: the original's fields, unset so far
        if name in LEGACY_FIELDS:
            return self.__dict__.get("legacy", {}).get(name)
        raise AttributeError(f"'Config' object has no attribute {name!r}")

    def _check_fields(self):
        if self.collective_backend not in COLLECTIVE_BACKENDS:
            raise ConfigError(f"Config.collective_backend={self.collective_backend!r} is not allowed; use one of "
                              f"{', '.join(repr(c) for c in COLLECTIVE_BACKENDS)}")
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"Config.transport={self.transport!r} is not allowed; use one of "
                              f"{', '.join(repr(t) for t in TRANSPORTS)}")
        if self.run_option not in RUN_OPTIONS:
            raise ConfigError(f"Config.run_option={self.run_option!r} is not allowed; "
                              f"use one of {', '.join(repr(o) for o in RUN_OPTIONS)}")
        for name in _BOOL_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, bool) and not (value is None and name in _FROM_THE_LOSS):
                raise ConfigError(f"Config.{name}={value!r} must be True or False" +
                                  " (or None: from the loss)" * (name in _FROM_THE_LOSS))
        for name in ("checkpoint_dir", "log_dir", "calibration"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"Config.{name}={value!r} must be a non-empty path string or None")
        if isinstance(self.check_steps, bool) or not isinstance(self.check_steps, int) or self.check_steps < 0:
            raise ConfigError(f"Config.check_steps={self.check_steps!r} must be an int >= 0 (0: no check)")
        steps = self.save_checkpoint_steps
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0):
            raise ConfigError(f"Config.save_checkpoint_steps={steps!r} must be a positive int or None")
        for name in ("profile_steps", "profile_workers"):
            value = getattr(self, name)
            low = 1 if name == "profile_steps" else 0
            if not isinstance(value, tuple) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= low
                                                       for v in value):
                raise ConfigError(f"Config.{name}={value!r} must be a tuple of ints >= {low}, e.g. (10, 11)")
        if self.session_config is not None and type(self.session_config).__name__ != "ConfigProto":
            raise ConfigError(f"Config.session_config must be a tf.compat.v1.ConfigProto or None, "
                              f"not {type(self.session_config).__name__}")

        for name in ("stall_warning_s", "stall_timeout_s"):
            value = getattr(self, name)
            if name == "stall_warning_s" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ConfigError(f"Config.{name}={value!r} must be a number of seconds >= 0 (0 turns it off)")
        if not isinstance(self.methods, dict) or not all(isinstance(k, str) and v in METHODS
                                                          for k, v in self.methods.items()):
            raise ConfigError(f"Config.methods={self.methods!r} must map variable names to one of "
                              f"{', '.join(repr(m) for m in METHODS)}")

    def check_combinations(self):
        """The rules between fields; get_runner checks them again, after any assignments."""
        if self.save_checkpoint_steps is not None and self.checkpoint_dir is None:
            raise ConfigError("Config.save_checkpoint_steps is set but Config.checkpoint_dir is None; "
                              "set checkpoint_dir to the directory to save into")
        if 0 < self.stall_timeout_s <= self.stall_warning():
            raise ConfigError(f"Config.stall_warning_s={self.stall_warning_s:g} must be below "
                              f"Config.stall_timeout_s={self.stall_timeout_s:g} (or 0, no warnings), or the job "
                              f"would end before its stall is ever reported")
        if self.check_steps and not self.sync:
            raise ConfigError("Config.check_steps is set with sync=False: asynchronous steps are no one device's "
                              "steps to compare with; check with sync=True")
        if self.profile_steps and self.log_dir is None:
            raise ConfigError("Config.profile_steps is set but Config.log_dir is None; traces are written there")

    def stall_warning(self):
        """The watchdog's warning in seconds: stall_warning_s, or derived from stall_timeout_s when that is None."""
        return derived_stall_warning(self.stall_timeout_s) if self.stall_warning_s is None else self.stall_warning_s

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Config))
_TUPLE_FIELDS = ("profile_steps", "profile_workers")


def check_ssh_carries(run_option, backend):
    """Refuse what ssh cannot carry: MPI opens its own connections between hosts, to addresses and ports it
    negotiates at run time, which no forward can follow (run_option MPI; collective backend Horovod)."""
    if run_option == "MPI" or backend == "horovod":
        what = "run_option='MPI'" if run_option == "MPI" else "collective_backend='horovod'"
        raise UnsupportedError(
            f"transport='ssh' cannot carry {what}: MPI (and Horovod on it) opens its own connections between "
            f"hosts, which no ssh forward can carry. Use run_option 'PS', 'HYBRID' or 'AUTO' with "
            f"collective_backend 'tf' or 'auto' (TF's gRPC is tunnelled), or transport='direct' on a trusted network")


# ---- the original Parallax's fields (Config.legacy) --------------------------------------------------------------
# `translate` turns every field that parallax honours into the matching Config field and returns one warning for
# each field it cannot honour, naming what happens instead; it never fails on an original field. It reads the
# original's configuration objects (legacy/config.py) by their attributes only.
@dataclasses.dataclass(frozen=True)
class Translated:
    config: Any  # parallax.Config with the original's fields applied
    warnings: tuple
    save_checkpoint_secs: Optional[float]  # honoured by parallel_run's session, which times the saves
    export_graph_path: Optional[str]  # honoured by parallel_run: the chief writes the rewritten graph there


def translate(config):
    """The Config that `config`'s original-Parallax fields ask for, and a warning per field not honoured."""
    legacy, changes, warnings = dict(config.legacy), {}, []

    def ignored(field, value, why):
        warnings.append(f"parallax: {field}={value!r} is not honoured: {why}")

    if legacy.get("sess_config") is not None:
        changes["session_config"] = legacy["sess_config"]
    if legacy.get("redirect_path"):
        changes["log_dir"] = str(legacy["redirect_path"])
    if legacy.get("search_partitions"):
        ignored("search_partitions", True, "parallax searches the number of partitions only with "
                "run_option='AUTO' and a calibration (parallax-calibrate); the graph's own partitions are kept")
    comm = legacy.get("communication_config")
    if comm is not None:
        _communication(comm, changes, ignored)
    ckpt = legacy.get("ckpt_config")
    secs = None
    if ckpt is not None:
        if ckpt.ckpt_dir:
            changes["checkpoint_dir"] = str(ckpt.ckpt_dir)
        if ckpt.save_ckpt_steps and (ckpt.ckpt_dir or config.checkpoint_dir):
            changes["save_checkpoint_steps"] = int(ckpt.save_ckpt_steps)
        elif ckpt.save_ckpt_steps:
            ignored("ckpt_config.save_ckpt_steps", ckpt.save_ckpt_steps,
                    "there is no ckpt_config.ckpt_dir to save into")
        secs = float(ckpt.save_ckpt_secs) if ckpt.save_ckpt_secs else None
        if secs is not None and not ckpt.ckpt_dir:
            ignored("ckpt_config.save_ckpt_secs", ckpt.save_ckpt_secs, "there is no ckpt_config.ckpt_dir to save into")
            secs = None
    profile = legacy.get("profile_config")
    if profile is not None:
        _profile(profile, changes, ignored, log_dir=changes.get("log_dir", config.log_dir))
    try:
        translated = config.replace(**changes)
    except ConfigError as e:
        raise ConfigError(f"{e} (from the original Parallax's fields: {', '.join(sorted(legacy))})") from None
    return Translated(translated, tuple(warnings), secs, legacy.get("export_graph_path") or None)


def _communication(comm, changes, ignored):
    ps, mpi = comm.ps_config, comm.mpi_config
    if ps is not None:
        if ps.protocol not in (None, "grpc"):
            ignored("ps_config.protocol", ps.protocol, "parallax's servers speak plain gRPC ('grpc')")
        if ps.replicate_variables:
            ignored("ps_config.replicate_variables", True, "in PS mode every worker reads the variables from the "
                    "servers each step (as replicate_variables=False); the results are the same")
        changes["local_aggregation"] = bool(ps.local_aggregation)
        changes["place_post_aggregation_ops"] = bool(ps.boundary_among_servers)
        changes["place_boundary_ops"] = bool(ps.boundary_between_workers_and_servers)
    if mpi is not None:
        if mpi.use_allgatherv:
            ignored("mpi_config.use_allgatherv", True, "the collective backend (Config.collective_backend) chooses "
                    "how rows are gathered")
        if mpi.mpirun_options:
            ignored("mpi_config.mpirun_options", mpi.mpirun_options, "parallax-launch builds the mpirun command; "
                    "pass MPI settings as OMPI_MCA_* environment variables, which mpirun reads")


def _profile(profile, changes, ignored, log_dir):
    steps = list(profile.profile_steps or ())
    if profile.profile_range:
        start, end = profile.profile_range
        steps += range(int(start), int(end) + 1)
    if not steps:
        return
    where = profile.profile_dir or log_dir
    if log_dir and profile.profile_dir and profile.profile_dir != log_dir:
        ignored("profile_config.profile_dir", profile.profile_dir, f"traces go to the log dir ({log_dir}) with "
                f"the rest of the job's files")
    changes["log_dir"] = log_dir or where
    changes["profile_steps"] = tuple(sorted({int(s) for s in steps}))
    if profile.profile_worker is not None:
        changes["profile_workers"] = (int(profile.profile_worker),)
    if not where:
        ignored("profile_config.profile_steps", tuple(steps), "there is no profile_dir to write the traces to")
        changes.pop("profile_steps")
        changes.pop("log_dir")
