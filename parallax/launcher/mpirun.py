"""The mpirun command line for a job: one rank per slot of the spec. Imports no TensorFlow."""
import os
import shutil
import sys

from parallax.errors import LaunchError

# Environment variables every rank gets (when set here), besides the PARALLAX_* ones the launcher adds.
PASSED_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS",
              "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "HOME", "LANG")


def mpirun_command(spec, command, env_names, ssh_port=None, ssh_identity=None):
    """`command` is the full argv each rank runs; `env_names` the variables to forward with `-x`."""
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
    rsh = []
    if ssh_port:
        rsh += ["-p", str(ssh_port)]
    if ssh_identity:
        rsh += ["-i", ssh_identity]
    if rsh:
        cmd += ["-mca", "plm_rsh_args", " ".join(rsh)]
    for name in sorted(set(env_names)):
        cmd += ["-x", name]
    return cmd + list(command)


def rerun_command():
    """The argv that re-runs this very program the way it was started (`python x.py`, `python -m m`, ...)."""
    orig = getattr(sys, "orig_argv", None)
    if orig and len(orig) > 1:
        return [sys.executable, *orig[1:]]
    return [sys.executable, *sys.argv]


def rank_environment(base_env, extra):
    env = {k: v for k, v in base_env.items() if k in PASSED_ENV}
    env.update(extra)
    return env
