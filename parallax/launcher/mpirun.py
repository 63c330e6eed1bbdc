"""The mpirun command line for a job: one rank per slot of the spec. Imports no TensorFlow."""
import dataclasses
import os
import shutil
import sys

from parallax.errors import LaunchError, UnsupportedError
from parallax.launcher import rsh_agent

# Environment variables every process gets (when set here), besides the PARALLAX_* ones the launcher adds. Nothing
# else crosses to other hosts: no secrets, no reliance on ~/.ssh/environment or the remote login's $USER.
PASSED_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS",
              "TF_DETERMINISTIC_OPS", "OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
              "CUDA_VISIBLE_DEVICES", "HOME", "LANG", "PYTHONUNBUFFERED")


def mpirun_command(spec, command, env_extra, ssh_settings=None, extra_args=()):
    """`command` is the full argv each rank runs. `env_extra` are set in mpirun's environment by the caller and
    forwarded by name with `-x`, as are the PASSED_ENV variables set here; with remote hosts, the caller also sets
    agent_environment()'s."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise LaunchError("mpirun was not found on PATH; install OpenMPI (`make install` does: apt-get install "
                          "openmpi-bin libopenmpi-dev)")
    # Several loopback "hosts" (127.0.0.1, 127.0.0.2) are one machine: mpirun must not try to ssh to them.
    hosts = f"localhost:{spec.num_workers}" if spec.all_local else \
        ",".join(f"{h.hostname}:{h.num_slots}" for h in spec.hosts)
    cmd = [mpirun, "-np", str(spec.num_workers), "-H", hosts, "--bind-to", "none", "--map-by", "slot",
           "--oversubscribe", "--tag-output", "-wdir", os.getcwd()]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    remote = [h for h in spec.hosts if not h.is_local]
    if remote and ssh_settings is not None:
        ports = {ssh_settings.port_for(h) for h in remote}
        if len(ports) > 1:
            raise UnsupportedError(f"{spec.source}: the hosts use different ssh ports {sorted(map(str, ports))}; "
                                   f"mpirun takes one port for all hosts: give them in ~/.ssh/config instead")
        # The agent is ssh that also preloads the bind shim into each remote orted (rsh_agent.py); its options
        # travel in mpirun's environment (rsh_agent.ENV_AGENT, set by the caller).
        cmd += ["-mca", "plm_rsh_agent", f"{sys.executable} -m parallax.launcher.rsh_agent"]
    cmd += list(extra_args)
    names = [k for k in PASSED_ENV if k in os.environ] + list(env_extra)
    for name in sorted(set(names)):
        cmd += ["-x", name]
    return cmd + list(command)


def is_mpirun(argv):
    """Whether `argv` (the command that starts a job's workers) is mpirun's, rather than spawn.py's."""
    return os.path.basename(argv[0]).startswith("mpirun")


def agent_environment(spec, ssh_settings, shim_env):
    """What mpirun's remote-shell agent needs in mpirun's environment (empty without remote hosts)."""
    remote = [h for h in spec.hosts if not h.is_local]
    if not remote or ssh_settings is None:
        return {}
    settings = dataclasses.replace(ssh_settings, port=ssh_settings.port_for(remote[0]))
    return rsh_agent.agent_environment(settings.options(), shim_env)


def forwarded_environment(env):
    return {k: v for k, v in env.items() if k in PASSED_ENV}


def rerun_command():
    """The argv that re-runs this very program the way it was started (`python x.py`, `python -m m`, ...)."""
    orig = getattr(sys, "orig_argv", None)
    if orig and len(orig) > 1:
        return [sys.executable, *orig[1:]]
    return [sys.executable, *sys.argv]
