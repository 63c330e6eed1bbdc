"""The original Parallax's configuration classes, and their translation to `Config`. Imports no TensorFlow.

Scripts written for the original tool build `parallax.Config()` and assign `communication_config`, `ckpt_config`,
`profile_config` and a few plain fields to it (config.py keeps those aside). `translate` turns every field that
parallax honours into the matching `Config` field and returns one warning for each field it cannot honour, naming
what happens instead; it never fails on an original field. docs/migrating.md lists the mapping.
"""
import dataclasses
from typing import Any, Optional, Sequence

from parallax.errors import ConfigError


@dataclasses.dataclass
class PSConfig:
    protocol: str = "grpc"
    replicate_variables: bool = True
    local_aggregation: bool = True
    boundary_among_servers: bool = True
    boundary_between_workers_and_servers: bool = True


@dataclasses.dataclass
class MPIConfig:
    use_allgatherv: bool = False
    mpirun_options: Any = ""


@dataclasses.dataclass
class CommunicationConfig:
    ps_config: PSConfig = dataclasses.field(default_factory=PSConfig)
    mpi_config: MPIConfig = dataclasses.field(default_factory=MPIConfig)


@dataclasses.dataclass
class CheckPointConfig:
    ckpt_dir: Optional[str] = None
    save_ckpt_steps: Optional[int] = None
    save_ckpt_secs: Optional[float] = None


@dataclasses.dataclass
class ProfileConfig:
    profile_dir: Optional[str] = None
    profile_steps: Optional[Sequence[int]] = None
    profile_range: Optional[Sequence[int]] = None
    profile_worker: Optional[int] = None


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
