"""Where each process of a job runs: a Process is one parameter server, worker or ssh tunnel on one host; a Layout
is the whole job's, with its cluster and job directory."""
import dataclasses
from typing import List, Optional

from parallax.process.resource_spec import Host, ResourceSpec


@dataclasses.dataclass(frozen=True)
class Process:
    host: Host
    host_index: int
    role: str  # "ps" | "worker" | "tunnel" (transport ssh: the forwards to and from one remote host)
    index: int  # PS task or worker rank
    port: Optional[int]

    @property
    def name(self):
        return f"{self.role}.{self.index}"

    @property
    def label(self):
        return f"{self.host.hostname}/{self.role}/{self.index}"


@dataclasses.dataclass
class Layout:
    spec: ResourceSpec
    processes: List[Process]
    cluster: Optional[dict]
    job_dir: str
    python: str

    @property
    def hosts(self):
        return self.spec.hosts

    def servers(self):
        return [p for p in self.processes if p.role == "ps"]

    def workers(self):
        return [p for p in self.processes if p.role == "worker"]
