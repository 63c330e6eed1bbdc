"""`parallax-launch`: run a parallax training script on the hosts of a resource spec. Imports no TensorFlow.

    parallax-launch [--resource-spec F | --hostfile F | -H h1:2,h2:2 | --local-cluster 2x2@1gbit | (none, inside
                    a Slurm allocation)] [-np N]
                    [--run-option HYBRID|PS|MPI] [--transport direct|ssh] [--ssh-port P] [--ssh-identity-file K] [--ssh-option OPT]
                    [-x NAME[=VALUE]] [--python PATH] [--log-dir D] [--start-timeout S]
                    [--stall-warning S] [--stall-timeout S] [--check-steps K [--check-warns]] [--dry-run]
                    -- python train.py [args]
"""
import argparse
import dataclasses
import os
import sys

from parallax.config import RUN_OPTIONS, TRANSPORTS
from parallax.errors import ParallaxError
from parallax.launcher import local_cluster, slurm, ssh
from parallax.launcher.job import LaunchOptions, launch, resolve_python
from parallax.process.protocol import ENV_CHECK, derived_stall_warning
from parallax.launcher.planner import plan_by_running
from parallax.process.resource_spec import ResourceSpec


def parser():
    p = argparse.ArgumentParser(
        prog="parallax-launch",
        description="Start a parallax job: the script is run once here to make the job's plan, then the parameter "
                    "servers the plan needs (at most one per host) and one worker per slot (with mpirun), over ssh "
                    "on remote hosts; every worker loads the plan. Every host is checked first; if any process "
                    "fails, every process on every host is stopped.",
        epilog="example: parallax-launch -H node1:2,node2:2 --ssh-identity-file ~/.ssh/id_ed25519 -- "
               "python train.py --steps 1000")
    _where_and_how(p)
    _supervision(p)
    p.add_argument("--dry-run", action="store_true",
                   help="make the plan, check the hosts, print every process, start nothing")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the training command")
    return p


def _where_and_how(p):
    """The hosts, and how processes reach them and are started there."""
    # None of them: inside a Slurm allocation, its hosts and slots (slurm.py).
    where = p.add_mutually_exclusive_group()
    where.add_argument("--resource-spec", metavar="F", help="a resource spec file (paper style or hostfile lines)")
    where.add_argument("--hostfile", metavar="F", help="an MPI hostfile (`host slots=N` lines)")
    where.add_argument("-H", "--hosts", metavar="H", help="hosts and slots, e.g. h1:2,h2:2")
    where.add_argument("--local-cluster", metavar="HOSTSxSLOTS[@RATE]",
                       help="build a cluster of network namespaces on this machine (root only), e.g. 2x2@1gbit, "
                            "run the job on it and remove it")
    p.add_argument("-np", "--num-workers", type=int, metavar="N", help="use only the first N slots of the spec")
    p.add_argument("--run-option", choices=RUN_OPTIONS,
                   help="override the script's Config.run_option; MPI starts no parameter servers")
    p.add_argument("--transport", choices=TRANSPORTS,
                   help="override the script's Config.transport: 'ssh' keeps every server on its host's loopback "
                        "and carries the traffic between hosts through ssh forwards (PS, HYBRID, AUTO with "
                        "collective_backend 'tf'; not MPI)")
    p.add_argument("--ssh-port", type=int, metavar="P", help="ssh port for hosts whose spec line gives none")
    p.add_argument("--ssh-identity-file", metavar="K", help="private key for ssh (batch mode: no passwords)")
    p.add_argument("--ssh-option", action="append", default=[], metavar="OPT",
                   help="an extra `ssh -o OPT`, e.g. UserKnownHostsFile=F (repeatable)")
    p.add_argument("-x", "--env", action="append", default=[], metavar="NAME[=VALUE]",
                   help="also pass this environment variable to every process (repeatable); only PATH, "
                        "PYTHONPATH, LD_LIBRARY_PATH, VIRTUAL_ENV, HOME, LANG and a few TF/OMP settings are passed "
                        "otherwise")
    p.add_argument("--python", metavar="PATH",
                   help="the Python to run on every host (default: the command's `python`, resolved here)")


def _supervision(p):
    """Output, time limits, and the check against one device."""
    p.add_argument("--log-dir", metavar="D", help="write one log file per process here instead of prefixed lines")
    p.add_argument("--start-timeout", type=float, default=120.0, metavar="S",
                   help="fail if not every process is up after S seconds (default 120)")
    p.add_argument("--stall-warning", type=float, metavar="S",
                   help="say which processes the others wait for after S seconds of silence or of no step "
                        "(default: the script's Config.stall_warning_s, 60; with --stall-timeout T alone, at most T/2; "
                             "0: never)")
    p.add_argument("--stall-timeout", type=float, metavar="S",
                   help="end the job, naming them, after S seconds (default: the script's Config.stall_timeout_s, "
                        "600; 0: never)")
    p.add_argument("--check-steps", type=int, metavar="K",
                   help="check the job: its first K training steps are computed again as one device computes "
                        "them, on the workers' batches, and every variable is compared; a difference fails the job "
                        "(overrides the script's Config.check_steps; docs/check.md)")
    p.add_argument("--check-warns", action="store_true",
                   help="with --check-steps: a difference only warns (Config.check_fails=False)")


def main(argv=None):
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        if not command:
            raise ParallaxError("no training command: put it after `--`, e.g. -- python train.py")
        if args.ssh_identity_file and not os.path.isfile(args.ssh_identity_file):
            raise ParallaxError(f"--ssh-identity-file {args.ssh_identity_file}: no such file")
        options = LaunchOptions(
            ssh=ssh.SshSettings(args.ssh_port, os.path.abspath(args.ssh_identity_file)
                                if args.ssh_identity_file else None,
                                tuple(w for opt in args.ssh_option for w in ("-o", opt))),
            log_dir=os.path.abspath(args.log_dir) if args.log_dir else None, start_timeout=args.start_timeout,
            dry_run=args.dry_run, python=args.python, run_option=args.run_option,
            env=_env_settings(args.env) + _check_setting(args),
            transport=args.transport)
        if args.local_cluster:
            return _on_local_cluster(args, command, options)
        if args.resource_spec or args.hostfile:
            spec = ResourceSpec.load(args.resource_spec or args.hostfile)
        elif args.hosts:
            spec = ResourceSpec.from_hosts_string(args.hosts)
        elif slurm.in_allocation(os.environ):
            text, found = slurm.hostfile_text(os.environ)
            print(f"parallax-launch: {found}", file=sys.stderr, flush=True)
            spec = ResourceSpec.parse(text, source="the Slurm allocation")
        else:
            raise ParallaxError("where should the job run? give --resource-spec F, --hostfile F, -H h1:2,h2:2 or "
                                "--local-cluster 2x2, or run inside a Slurm allocation (salloc/sbatch)")
        return _launch(spec, args, command, options)
    except ParallaxError as e:
        print(f"parallax-launch: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


def _check_setting(args):
    """--check-steps K [--check-warns], for every process (protocol.ENV_CHECK)."""
    if args.check_steps is None:
        if args.check_warns:
            raise ParallaxError("--check-warns needs --check-steps K")
        return ()
    if args.check_steps < 0:
        raise ParallaxError(f"--check-steps {args.check_steps}: give a number of steps >= 0 (0: no check)")
    return ((ENV_CHECK, f"{args.check_steps}:warn" if args.check_warns else str(args.check_steps)),)


def _env_settings(items):
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not name.isidentifier():
            raise ParallaxError(f"-x {item!r}: write NAME or NAME=VALUE")
        if not sep and name not in os.environ:
            raise ParallaxError(f"-x {name}: {name} is not set here; write -x {name}=VALUE")
        env[name] = value if sep else os.environ[name]
    return tuple(env.items())


def _launch(spec, args, command, options):
    if args.num_workers is not None:
        spec = spec.first_workers(args.num_workers)
    _, command = resolve_python(command, options.python)
    given = {name: value for name, value in (("stall_warning_s", args.stall_warning),
                                             ("stall_timeout_s", args.stall_timeout)) if value is not None}
    # Wrong flags are refused before the script is run to plan; with the script's own values, after.
    _check_stall_limits(dataclasses.replace(options, **dict({"stall_warning_s": 0, "stall_timeout_s": 0}, **given)))
    plan, settings = plan_by_running(spec, command, options)
    options = dataclasses.replace(options, **{
        name: given if given is not None else settings.get(name, getattr(options, name))
        for name, given in (("stall_warning_s", args.stall_warning), ("stall_timeout_s", args.stall_timeout),
                            ("transport", args.transport))})
    if args.stall_warning is None and args.stall_timeout is not None:  # the warning comes before the timeout given
        options = dataclasses.replace(options, stall_warning_s=min(options.stall_warning_s,
                                                                   derived_stall_warning(args.stall_timeout)))
    _check_stall_limits(options)
    return launch(spec, command, options, plan, run_option=args.run_option)


def _check_stall_limits(options):
    for name, flag in (("stall_warning_s", "--stall-warning"), ("stall_timeout_s", "--stall-timeout")):
        if not 0 <= getattr(options, name) < float("inf"):
            raise ParallaxError(f"{flag} {getattr(options, name):g}: give a number of seconds >= 0 (0 turns it off)")
    if 0 < options.stall_timeout_s <= options.stall_warning_s:
        raise ParallaxError(f"the stall warning ({options.stall_warning_s:g} s) must come before the stall timeout "
                            f"({options.stall_timeout_s:g} s): lower --stall-warning or raise --stall-timeout")


def _on_local_cluster(args, command, options):
    hosts, slots, rate = local_cluster.parse_shape(args.local_cluster)
    with local_cluster.LocalCluster(hosts, slots, rate=rate) as cluster:
        print(f"parallax-launch: {cluster}", file=sys.stderr, flush=True)
        options = dataclasses.replace(
            options, ssh=dataclasses.replace(options.ssh, extra_options=options.ssh.extra_options
                                             + tuple(cluster.ssh_options())),
            mpi_args=tuple(cluster.mpi_args()))
        return _launch(ResourceSpec.parse(cluster.spec_text(), source="--local-cluster"), args, command, options)


if __name__ == "__main__":
    sys.exit(main())
