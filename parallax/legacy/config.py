"""The original Parallax's configuration classes. Imports no TensorFlow.

Scripts written for the original tool build `parallax.Config()` and assign `communication_config`, `ckpt_config`,
`profile_config` and a few plain fields to it (config.py keeps those aside, and its `translate` turns them into
Config fields). docs/migrating.md lists the mapping.
"""
import dataclasses
from typing import Any, Optional, Sequence


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
