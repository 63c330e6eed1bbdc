"""Transport "ssh": no job port is reachable from the network. Every TF server listens on its own host's loopback
(the cluster lists every task as 127.0.0.1:<port>; preflight makes the ports distinct across hosts), and each host
reaches the others' servers through ssh port forwards over one connection per remote host from the launcher:

- `-L`: the launcher's loopback port P leads to P on that host (its servers, for this machine's processes);
- `-R`: that host's loopback port P leads back to P here: this machine's servers, or the `-L` of a third host.

So traffic between two remote hosts passes through the launcher's machine, encrypted and authenticated by ssh.
Workers start without mpirun (spawn.py): MPI's own connections between hosts cannot be forwarded, which is why MPI
and Horovod are refused with this transport (planning.py). Imports no TensorFlow.
"""
import json
import os
import sys

from parallax.launcher import mpirun, preflight
from parallax.launcher.layout import Process
from parallax.process import protocol
from parallax.launcher.ssh import command as ssh_command

LOOPBACK = "127.0.0.1"


def tunnels(layout, options):
    """(role-"tunnel" process, argv, env, stdin) per remote host: `ssh -N` with its forwards, for the supervisor
    to run beside the servers (a tunnel that fails ends the job, naming it)."""
    found = []
    for index, host in enumerate(layout.hosts):
        if host.is_local:
            continue
        mine = [p.port for p in layout.processes if p.port is not None and p.host_index == index]
        others = [p.port for p in layout.processes if p.port is not None and p.host_index != index]
        forwards = [w for port in mine for w in ("-L", f"{LOOPBACK}:{port}:{LOOPBACK}:{port}")]
        forwards += [w for port in others for w in ("-R", f"{LOOPBACK}:{port}:{LOOPBACK}:{port}")]
        argv = ["ssh", *options.ssh.options(host), "-N", "-o", "ExitOnForwardFailure=yes", *forwards,
                host.ssh_target]
        found.append((Process(host, index, "tunnel", index, None), argv, None, None))
    return found


def spawner(layout, command, env_extra, options, local_env):
    """(argv, env, stdin line) of spawn.py starting one worker per slot: here directly, elsewhere over ssh
    through the host agent (which gets the environment on stdin and stops the worker when the connection ends)."""
    workers = []
    for p in layout.workers():
        extra = dict(env_extra, **{protocol.ENV_WORKER_ID: str(p.index), protocol.ENV_CWD: os.getcwd()})
        if p.host.is_local:
            workers.append({"rank": p.index, "host": p.host.hostname, "argv": list(command),
                            "env": dict(local_env, **extra), "stdin": None})
            continue
        env = dict(mpirun.forwarded_environment(local_env), **extra)
        agent = [layout.python, *preflight.AGENT, "run", p.name, "--", *command]
        workers.append({"rank": p.index, "host": p.host.hostname, "argv": ssh_command(options.ssh, p.host, agent),
                        "env": None, "stdin": json.dumps(env) + "\n"})
    argv = [sys.executable, "-m", "parallax.launcher.spawn"]
    return argv, dict(local_env), json.dumps({"workers": workers}) + "\n"
