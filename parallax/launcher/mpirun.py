"""The mpirun command line for a job: one rank per slot of the spec. Imports no TensorFlow."""
import dataclasses
import os
import shutil
import sys

from parallax.errors import LaunchError, UnsupportedError

# Environment variables every process gets (when set here), besides the PARALLAX_* ones the launcher adds. Nothing
# else crosses to other hosts: no secrets, no reliance on ~/.ssh/environment or the remote login's $USER.
PASSED_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS",
              "TF_DETERMINISTIC_OPS", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "HOME", "LANG", "PYTHONUNBUFFERED")


def mpirun_command(spec, command, env_extra, ssh_settings=None, extra_args=()):
    """`command` is the full argv each rank runs. `env_extra` are set in mpirun's environment by the caller and
    forwarded by name with `-x`, as are the PASSED_ENV variables set here."""
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
        settings = dataclasses.replace(ssh_settings, port=next(iter(ports)))
        cmd += ["-mca", "plm_rsh_agent", "ssh", "-mca", "plm_rsh_args", settings.mpirun_rsh_args()]
    cmd += list(extra_args)
    names = [k for k in PASSED_ENV if k in os.environ] + list(env_extra)
    for name in sorted(set(names)):
        cmd += ["-x", name]
    return cmd + list(command)


def forwarded_environment(env):
    return {k: v for k, v in env.items() if k in PASSED_ENV}


def rerun_command():
    """The argv that re-runs this very program the way it was started (`python x.py`, `python -m m`, ...)."""
    orig = getattr(sys, "orig_argv", None)
    if orig and len(orig) > 1:
        return [sys.executable, *orig[1:]]
    return [sys.executable, *sys.argv]
