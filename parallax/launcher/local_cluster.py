"""A small cluster of separate hosts on this one machine, to rehearse multi-host jobs (and to test them).

Each host is a Linux network namespace with its own address on a private bridge, its own hostname (a UTS
namespace) and its own sshd, which accepts a client key generated for this cluster only. Links can be shaped with
`tc ... tbf`. The hosts share this machine's files and processes, so the same Python and parallax are found at the
same paths everywhere. Everything is created with ids unique to this cluster and removed by those ids. Needs root,
`ip`, `tc`, `unshare`, `sshd` and `ssh-keygen`. Imports no TensorFlow.
"""
import ipaddress
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

from parallax.errors import LaunchError
from parallax.launcher import stale

_SHAPE = re.compile(r"^(?P<hosts>\d+)x(?P<slots>\d+)(?:@(?P<rate>\d+(?:\.\d+)?[kmg]?bit))?$", re.IGNORECASE)
_TOOLS = {"ip": "iproute2", "tc": "iproute2", "unshare": "util-linux", "sshd": "openssh-server",
          "ssh-keygen": "openssh-client", "ssh": "openssh-client"}
SSH_PORT = 22
# the shaper's bucket: bytes a link passes at once after idling (tbf needs one of at least rate / HZ)
LINK_BURST_BYTES = 256 * 1024


def parse_shape(text):
    """`HOSTSxSLOTS[@RATE]`, e.g. `2x2@1gbit` -> (2, 2, "1gbit")."""
    m = _SHAPE.match(text.strip())
    if not m or not 1 <= int(m["hosts"]) <= 16 or not 1 <= int(m["slots"]) <= 64:
        raise LaunchError(f"--local-cluster {text!r}: write HOSTSxSLOTS[@RATE] with 1-16 hosts and 1-64 slots, "
                          f"e.g. 2x2 or 2x2@1gbit (rates as tc writes them: 100mbit, 1gbit)")
    return int(m["hosts"]), int(m["slots"]), (m["rate"] or None)


def check_available():
    """Raise LaunchError saying exactly what is missing to build a local cluster here."""
    if os.geteuid() != 0:
        raise LaunchError("a local cluster needs root (it creates network namespaces, a bridge and sshd "
                          "processes); run as root, or run on real hosts with --resource-spec")
    missing = [f"{tool} (apt-get install {pkg})" for tool, pkg in _TOOLS.items()
               if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}")]
    if missing:
        raise LaunchError(f"a local cluster needs: {', '.join(missing)}")


class LocalCluster:
    """`with LocalCluster(2, 2, rate="1gbit") as c:` then use c.hosts, c.spec_text(), c.ssh_options()."""

    def __init__(self, num_hosts, slots_per_host, rate=None, workdir=None, say=None):
        check_available()
        # A test bed whose launcher was killed with -9 could not remove itself: it goes now.
        stale.sweep_clusters(say=say or (lambda text: print(f"parallax: {text}", file=sys.stderr, flush=True)))
        self.num_hosts, self.slots, self.rate = num_hosts, slots_per_host, rate
        self.id = secrets.token_hex(3)
        self.dir = workdir or tempfile.mkdtemp(prefix=f"parallax-cluster-{self.id}-")
        self.bridge = f"pxb{self.id}"
        self.namespaces = [f"px{self.id}h{i}" for i in range(num_hosts)]
        self.veths = [f"px{self.id}v{i}" for i in range(num_hosts)]
        self.hostnames = [f"px{self.id}-host{i}" for i in range(num_hosts)]
        self.network = _free_subnet()
        addresses = list(self.network.hosts())
        self.gateway = str(addresses[0])
        self.hosts = [str(a) for a in addresses[1:num_hosts + 1]]
        self.client_key = os.path.join(self.dir, "client_key")
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        self.sshd_pids = []
        self._created_links, self._created_namespaces = [], []

    # ---- building ---------------------------------------------------------------------------------------------
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def _record(self, link=None, namespace=None):
        """Note what is about to be made, before making it: a launcher killed at any moment leaves a full record."""
        if link:
            self._created_links.append(link)
        if namespace:
            self._created_namespaces.append(namespace)
        stale.record_cluster(self.id, {"namespaces": self._created_namespaces, "links": self._created_links,
                                       "dir": self.dir})

    def start(self):
        self._record(link=self.bridge)
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.gateway}/{self.network.prefixlen}", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"parallax-cluster-{self.id}",
              "-f", self.client_key])
        for i, (ns, veth, address) in enumerate(zip(self.namespaces, self.veths, self.hosts)):
            self._record(namespace=ns)
            _run(["ip", "netns", "add", ns])
            self._write_name_files(ns)
            self._record(link=veth)
            _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
            inside = ["ip", "netns", "exec", ns]
            _run(inside + ["ip", "addr", "add", f"{address}/{self.network.prefixlen}", "dev", "eth0"])
            _run(inside + ["ip", "link", "set", "eth0", "up"])
            _run(inside + ["ip", "link", "set", "lo", "up"])
            _run(inside + ["ip", "route", "add", "default", "via", self.gateway])
            if self.rate:
                for dev, where in ((veth, []), ("eth0", inside)):
                    _run(where + ["tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                                  "burst", str(LINK_BURST_BYTES), "latency", "100ms"])
            self._start_sshd(i)
        with open(self.known_hosts, "w") as f:
            f.writelines(f"{a} {self._host_public_key(i)}\n" for i, a in enumerate(self.hosts))
        self._wait_for_sshd()

    def _write_name_files(self, namespace):
        """/etc/netns/<ns>/{hosts,resolv.conf}, which `ip netns exec` mounts over /etc's for sshd and all it starts:
        every host's name resolves from the file, and any other name fails at once at the namespace's own loopback.
        Otherwise a lookup (MPI's of each host's name) went to the machine's nameserver, which the namespace cannot
        reach, and waited out its timeouts: 30 s and more per job start. No query leaves the test bed."""
        etc = os.path.join(stale.NETNS_ETC, namespace)
        os.makedirs(etc, exist_ok=True)
        with open(os.path.join(etc, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for a, n in zip(self.hosts, self.hostnames)))
        with open(os.path.join(etc, "resolv.conf"), "w") as f:
            f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")

    def _start_sshd(self, i):
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        host_key = os.path.join(self.dir, f"host_key.{i}")
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", host_key])
        authorized = os.path.join(self.dir, "authorized_keys")
        shutil.copyfile(self.client_key + ".pub", authorized)
        config = os.path.join(self.dir, f"sshd_config.{i}")
        with open(config, "w") as f:
            f.write(f"Port {SSH_PORT}\nListenAddress {self.hosts[i]}\nHostKey {host_key}\n"
                    f"AuthorizedKeysFile {authorized}\nPermitRootLogin prohibit-password\n"
                    f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    f"PidFile none\nMaxStartups 100\nMaxSessions 100\nLogLevel ERROR\n")
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        log = open(os.path.join(self.dir, f"sshd.{i}.log"), "w")
        # unshare --uts: each host has its own name, as separate machines do (MPI tells nodes apart by name).
        proc = subprocess.Popen(["ip", "netns", "exec", self.namespaces[i], "unshare", "--uts", "sh", "-c",
                                 f"hostname {self.hostnames[i]} && exec {sshd} -D -e -f {config}"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        log.close()
        self.sshd_pids.append(proc.pid)

    def _host_public_key(self, i):
        with open(os.path.join(self.dir, f"host_key.{i}.pub")) as f:
            return " ".join(f.read().split()[:2])

    def _wait_for_sshd(self, timeout=20):
        deadline = time.time() + timeout
        for address in self.hosts:
            while subprocess.run(self.ssh_command(address, "true"), capture_output=True).returncode != 0:
                if time.time() > deadline:
                    raise LaunchError(f"local cluster: sshd on {address} did not accept the cluster key within "
                                      f"{timeout} s; see {self.dir}/sshd.*.log")
                time.sleep(0.2)

    # ---- using ------------------------------------------------------------------------------------------------
    def ssh_options(self):
        """The ssh options (for `ssh`, and mpirun's remote-shell agent) that reach this cluster's hosts, and only them."""
        return ["-i", self.client_key, "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes"]

    def mpi_args(self):
        """Keep MPI's own connections on the cluster's network (this machine has other interfaces too)."""
        return ["-mca", "oob_tcp_if_include", str(self.network), "-mca", "btl_tcp_if_include", str(self.network)]

    def mpi_environment(self):
        """mpi_args as OMPI_MCA_* environment settings, for a parallax-launch run from outside --local-cluster."""
        return {"OMPI_MCA_btl": "tcp,self", "OMPI_MCA_btl_tcp_if_include": str(self.network),
                "OMPI_MCA_oob_tcp_if_include": str(self.network)}

    def spec_file(self):
        """This cluster's resource spec as a file in its own directory (written once); its path."""
        path = os.path.join(self.dir, "hosts.txt")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(self.spec_text())
        return path

    def launch_options(self):
        """The parallax-launch options that run a job on this cluster's hosts, from outside --local-cluster."""
        return ["--resource-spec", self.spec_file(), "--ssh-identity-file", self.client_key,
                "--ssh-option", f"UserKnownHostsFile={self.known_hosts}", "--ssh-option", "StrictHostKeyChecking=yes"]

    def ssh_command(self, address, command):
        return ["ssh", *self.ssh_options(), "-o", "ConnectTimeout=5", address, command]

    def spec_text(self):
        return "\n".join(f"{a} slots={self.slots}" for a in self.hosts) + "\n"

    def namespace_pids(self, index):
        out = subprocess.run(["ip", "netns", "pids", self.namespaces[index]], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def __str__(self):
        rate = f", links shaped to {self.rate}" if self.rate else ""
        return (f"local cluster {self.id}: {self.num_hosts} hosts x {self.slots} slots at "
                f"{', '.join(self.hosts)} (bridge {self.bridge}{rate})")

    # ---- removing ---------------------------------------------------------------------------------------------
    def stop(self):
        """Kill every process inside our namespaces (sshd and whatever it started), then remove the namespaces,
        links and files. Safe to call twice, and after a partial start."""
        stale.remove_cluster({"namespaces": self._created_namespaces, "links": self._created_links})
        self._created_namespaces, self._created_links, self.sshd_pids = [], [], []
        shutil.rmtree(self.dir, ignore_errors=True)
        for name in self.hostnames:  # OpenMPI's session directory of the jobs its hosts ran, named after the host
            shutil.rmtree(_mpi_session_dir(name), ignore_errors=True)
        stale.forget_cluster(self.id)


def _mpi_session_dir(hostname):
    return os.path.join(tempfile.gettempdir(), f"ompi.{hostname}.{os.getuid()}")


def _free_subnet():
    """A /24 in 10.231.0.0/16 that no route on this machine uses."""
    routes = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True).stdout
    used = [ipaddress.ip_network(w, strict=False) for w in re.findall(r"\b\d+\.\d+\.\d+\.\d+/\d+\b", routes)]
    for _ in range(100):
        net = ipaddress.ip_network(f"10.231.{secrets.randbelow(250) + 1}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise LaunchError("local cluster: no free 10.231.x.0/24 subnet on this machine")


def _run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise LaunchError(f"local cluster: `{' '.join(cmd)}` failed: {result.stderr.strip() or result.stdout}")
    return result.stdout
