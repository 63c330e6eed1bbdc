"""Hosts and slots from a Slurm allocation, for `parallax-launch` with no host option inside one. Imports no
TensorFlow.

The hosts are SLURM_JOB_NODELIST expanded by `scontrol show hostnames` (Slurm's own hostlist syntax, so every form
it accepts works); the slots per host are SLURM_NTASKS_PER_NODE (`--ntasks-per-node`) when set, else
SLURM_TASKS_PER_NODE (Slurm's compressed list: `2(x3),1` is 2 on each of three nodes, then 1).
"""
import re
import shutil
import subprocess

from parallax.errors import ResourceSpecError

SCONTROL_TIMEOUT_S = 30
_TASKS_ITEM = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def in_allocation(environ):
    return bool(environ.get("SLURM_JOB_NODELIST"))


def tasks_per_node(text, num_nodes):
    """Slurm's compressed tasks-per-node list, expanded to one count per node."""
    counts = []
    for item in text.split(","):
        m = _TASKS_ITEM.match(item.strip())
        if not m:
            raise ResourceSpecError(f"SLURM_TASKS_PER_NODE={text!r}: cannot read {item!r}; Slurm writes it as "
                                    f"N or N(xK), comma separated")
        counts += [int(m[1])] * int(m[2] or 1)
    if len(counts) == 1 and num_nodes > 1:
        counts *= num_nodes  # a single number: every node
    if len(counts) != num_nodes:
        raise ResourceSpecError(f"SLURM_TASKS_PER_NODE={text!r} gives {len(counts)} counts for {num_nodes} nodes")
    if any(c <= 0 for c in counts):
        raise ResourceSpecError(f"SLURM_TASKS_PER_NODE={text!r}: every node needs at least one task")
    return counts


def expand_nodelist(nodelist, run=subprocess.run):
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise ResourceSpecError("inside a Slurm allocation, parallax-launch reads its hosts with `scontrol show "
                                "hostnames`, which is not on PATH: apt-get install slurm-client (or give the "
                                "hosts with --hostfile / -H)")
    try:
        done = run([scontrol, "show", "hostnames", nodelist], capture_output=True, text=True,
                   timeout=SCONTROL_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ResourceSpecError(f"`scontrol show hostnames {nodelist}` did not answer within {SCONTROL_TIMEOUT_S} "
                                f"s; is Slurm's configuration (SLURM_CONF) readable here?") from None
    hosts = done.stdout.split()
    if done.returncode != 0 or not hosts:
        raise ResourceSpecError(f"`scontrol show hostnames {nodelist}` failed (exit {done.returncode}): "
                                f"{done.stderr.strip()[-500:] or 'no hosts'}")
    return hosts


def hostfile_text(environ):
    """(MPI hostfile text for the allocation, a line saying what was found)."""
    nodelist = environ["SLURM_JOB_NODELIST"]
    hosts = expand_nodelist(nodelist)
    if environ.get("SLURM_NTASKS_PER_NODE"):
        source = f"SLURM_NTASKS_PER_NODE={environ['SLURM_NTASKS_PER_NODE']}"
        counts = tasks_per_node(environ["SLURM_NTASKS_PER_NODE"], len(hosts))
    elif environ.get("SLURM_TASKS_PER_NODE"):
        source = f"SLURM_TASKS_PER_NODE={environ['SLURM_TASKS_PER_NODE']}"
        counts = tasks_per_node(environ["SLURM_TASKS_PER_NODE"], len(hosts))
    else:
        raise ResourceSpecError("inside a Slurm allocation but neither SLURM_NTASKS_PER_NODE nor "
                                "SLURM_TASKS_PER_NODE is set; allocate with --ntasks-per-node=N (or give the hosts "
                                "with --hostfile)")
    listed = ", ".join(f"{h} x{c}" for h, c in zip(hosts, counts))
    found = f"Slurm allocation {environ.get('SLURM_JOB_ID', '?')}: {listed} (SLURM_JOB_NODELIST={nodelist}, {source})"
    return "".join(f"{h} slots={c}\n" for h, c in zip(hosts, counts)), found
