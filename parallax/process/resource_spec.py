"""Resource specs: which hosts a job runs on and how many worker slots each has. Imports no TensorFlow.

Three spellings are accepted, and every host may be written `user@host:sshport`:
  paper style, one host per line   `10.0.0.1: 0,1,2` (device ids) or a bare `10.0.0.1` (one slot)
  MPI hostfile style               `10.0.0.1 slots=4` (`max_slots=` is accepted and ignored)
  the -H string                    `h1:2,h2:2` (`user@h1:2222:2` gives the ssh port before the slot count)
`ResourceSpec.load` reads a one-line string with no spaces that fits the -H form (`localhost:2`) as -H; files and
other text as paper or hostfile lines (where `host:N` would mean ssh port N, so write device ids after `: `).
Device ids on hosts without GPUs are simply worker slots that run on the CPU.
"""
import dataclasses
import ipaddress
import os
import re
import socket
from typing import Optional, Tuple

from parallax.errors import ResourceSpecError

_HOST = r"(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:]+\])(?::(?P<port>\d+))?"
_PAPER_LINE = re.compile(rf"^{_HOST}(?:\s*:\s*(?P<ids>-?\d+(?:\s*,\s*-?\d+)*)\s*,?)?$")
_HOSTFILE_LINE = re.compile(rf"^{_HOST}(?P<opts>(?:\s+[A-Za-z_]+=\S*)+)$")
_H_ITEM = re.compile(rf"^{_HOST}:(?P<slots>-?\d+)$")
_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


@dataclasses.dataclass(frozen=True)
class Host:
    hostname: str
    slots: Tuple[int, ...]  # device ids; on CPU-only hosts they are just worker slots
    user: Optional[str] = None
    ssh_port: Optional[int] = None

    @property
    def num_slots(self):
        return len(self.slots)

    @property
    def is_local(self):
        """True when the host is this machine (any loopback address, or this machine's name)."""
        name = self.hostname.strip("[]")
        return (name in _LOCAL_NAMES or name.startswith("127.")
                or name in (socket.gethostname(), socket.getfqdn()))

    @property
    def ssh_target(self):
        return f"{self.user}@{self.hostname}" if self.user else self.hostname

    def __str__(self):
        port = f":{self.ssh_port}" if self.ssh_port else ""
        return f"{self.ssh_target}{port}: {','.join(map(str, self.slots))}"


@dataclasses.dataclass(frozen=True)
class ResourceSpec:
    hosts: Tuple[Host, ...]
    source: str = "<string>"

    @property
    def num_workers(self):
        return sum(h.num_slots for h in self.hosts)

    @property
    def num_hosts(self):
        return len(self.hosts)

    @property
    def all_local(self):
        return all(h.is_local for h in self.hosts)

    def host_of_worker(self, worker_id):
        """Workers fill hosts in spec order: the first host's slots are workers 0..k-1, and so on."""
        for index, host in enumerate(self.hosts):
            if worker_id < host.num_slots:
                return index
            worker_id -= host.num_slots
        raise IndexError(f"worker {worker_id} is beyond the spec's {self.num_workers} slots")

    def first_workers(self, n):
        """The spec cut to its first `n` slots, in spec order (`-np n`); hosts left with no slot are dropped."""
        if not 1 <= n <= self.num_workers:
            raise ResourceSpecError(f"{self.source}: -np {n} asks for {n} workers but the spec has "
                                    f"{self.num_workers} slots")
        hosts, left = [], n
        for host in self.hosts:
            if left > 0:
                hosts.append(dataclasses.replace(host, slots=host.slots[:left]))
                left -= min(left, host.num_slots)
        return ResourceSpec(tuple(hosts), self.source)

    def __str__(self):
        return "\n".join(str(h) for h in self.hosts)

    # ---- constructors -------------------------------------------------------------------------------------
    @classmethod
    def load(cls, spec):
        """A ResourceSpec from a ResourceSpec, a path to a spec file, spec text, or a `-H` string."""
        if isinstance(spec, ResourceSpec):
            return spec
        if isinstance(spec, os.PathLike):
            return cls.from_file(os.fspath(spec))
        if not isinstance(spec, str):
            raise ResourceSpecError(f"a resource spec must be a path, spec text or ResourceSpec, "
                                    f"not {type(spec).__name__}")
        if os.path.isfile(spec):
            return cls.from_file(spec)
        text = spec.strip()
        if "\n" not in text and ("/" in text or text.endswith((".txt", ".spec", ".hosts"))):
            raise ResourceSpecError(f"resource spec file {spec!r} does not exist")
        if "\n" not in text and not re.search(r"\s", text) and _looks_like_h_string(text):
            return cls.from_hosts_string(text)
        return cls.parse(spec)

    @classmethod
    def from_file(cls, path):
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise ResourceSpecError(f"cannot read resource spec file {path!r}: {e.strerror}") from None
        return cls.parse(text, source=path)

    @classmethod
    def parse(cls, text, source="<string>"):
        """Paper-style or MPI-hostfile-style lines (they may be mixed); `#` starts a comment."""
        hosts = []
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if line:
                hosts.append((lineno, _parse_line(line, f"{source}:{lineno}")))
        return cls._checked(hosts, source)

    @classmethod
    def from_hosts_string(cls, text, source="-H"):
        """`h1:2,h2:2`: host and slot count, comma separated (`user@h1:2222:2` to give an ssh port)."""
        hosts = []
        for i, item in enumerate(text.split(","), start=1):
            item = item.strip()
            m = _H_ITEM.match(item)
            if not m:
                raise ResourceSpecError(f"{source}: item {i} {item!r} is not 'host:slots' "
                                        f"(e.g. 'h1:2,h2:2' or 'user@h1:2222:2')")
            n = int(m["slots"])
            if n <= 0:
                raise ResourceSpecError(f"{source}: item {i} {item!r} has {n} slots; a host needs at least 1")
            hosts.append((i, _host(m, tuple(range(n)))))
        return cls._checked(hosts, source)

    @classmethod
    def _checked(cls, numbered_hosts, source):
        if not numbered_hosts:
            raise ResourceSpecError(f"{source}: the resource spec is empty; list at least one host, "
                                    f"e.g. 'localhost: 0' or 'localhost slots=2'")
        seen = {}
        for where, host in numbered_hosts:
            key = _machine_key(host.hostname)
            if key in seen:
                first_where, first = seen[key]
                same = "listed twice" if first.hostname.lower() == host.hostname.lower() else \
                    f"the same machine as {first.hostname!r}"
                raise ResourceSpecError(
                    f"{source}:{where}: host {host.hostname!r} is {same} (line/item {first_where}); list each "
                    f"machine once, under one name, with all its slots")
            seen[key] = (where, host)
        return cls(tuple(h for _, h in numbered_hosts), source)


def _machine_key(hostname):
    """Names of one address compare equal: `localhost`, this machine's own name and 127.0.0.1; `::1` and `[::1]`;
    IP literals in any spelling. Other names are compared as written (no DNS lookups while parsing); other loopback
    addresses (127.0.0.2) stay separate hosts, which the tests use as a second machine."""
    name = hostname.strip("[]").lower()
    if name in ("localhost", socket.gethostname().lower(), socket.getfqdn().lower()):
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def _looks_like_h_string(text):
    return all(_H_ITEM.match(item.strip()) for item in text.split(","))


def _host(m, slots):
    return Host(hostname=m["host"], slots=slots, user=m["user"], ssh_port=int(m["port"]) if m["port"] else None)


def _parse_line(line, where):
    m = _HOSTFILE_LINE.match(line)
    if m:
        slots = None
        for opt in m["opts"].split():
            key, _, value = opt.partition("=")
            if key == "slots":
                if not re.fullmatch(r"-?\d+", value):
                    raise ResourceSpecError(f"{where}: slots={value!r} is not a whole number")
                slots = int(value)
            elif key != "max_slots":
                raise ResourceSpecError(f"{where}: unknown hostfile option {key!r}; only slots= and max_slots= "
                                        f"are understood")
        if slots is None:
            raise ResourceSpecError(f"{where}: hostfile line {line!r} has no slots=N")
        if slots <= 0:
            raise ResourceSpecError(f"{where}: slots={slots}; a host needs at least 1 slot")
        return _host(m, tuple(range(slots)))
    m = _PAPER_LINE.match(line)
    if not m:
        raise ResourceSpecError(f"{where}: cannot parse {line!r}; write 'host: 0,1' (device ids), a bare 'host', "
                                f"or 'host slots=N', optionally as 'user@host:sshport'")
    if m["ids"] is None:
        if m["port"]:  # `localhost:2`: the -H form's slot count, or an ssh port? Refuse to guess.
            raise ResourceSpecError(f"{where}: {line!r} is ambiguous in a spec file: for {m['port']} slots write "
                                    f"'{m['host']} slots={m['port']}' (or device ids: '{m['host']}: 0,1'); for "
                                    f"ssh port {m['port']} write it with the slots: '{line}: 0' or "
                                    f"'{line} slots=1'")
        return _host(m, (0,))
    ids = tuple(int(x) for x in m["ids"].replace(" ", "").rstrip(",").split(","))
    negative = [i for i in ids if i < 0]
    if negative:
        raise ResourceSpecError(f"{where}: device id {negative[0]} is negative; ids are 0, 1, 2, ...")
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ResourceSpecError(f"{where}: device id {dupes[0]} is listed twice")
    return _host(m, ids)
