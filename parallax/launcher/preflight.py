"""Preflight: before anything starts, check every host of a job, in parallel. Imports no TensorFlow.

On each host: it is reachable and accepts our key; the job's Python runs and imports the same parallax as here (same
paths); the script exists; the ports the job needs can be reserved; the job directory can be created. Every failure
is reported, one line per host, in one LaunchError.
"""
import concurrent.futures
import dataclasses
import json
import subprocess
from typing import Dict, List

from parallax.errors import LaunchError
from parallax.launcher import host_agent, ssh
from parallax.process import ports

AGENT = ["-m", "parallax.launcher.host_agent"]
# Each host draws its ports on its own, so two hosts can draw the same one. Drawing a few more than a host needs
# lets the job's ports be distinct across hosts: the ssh transport needs that (every host sees every server on
# its loopback), and a port then names one task in every log and message.
SPARE_PORTS = 4


class PreflightError(LaunchError):
    """One or more hosts failed the checks; nothing was started."""


@dataclasses.dataclass
class HostReport:
    ports: List[int]
    hostname: str


def run_preflight(spec, ports_per_host, python, script, job_dir, settings, progress=None, files=None):
    """{host index: HostReport}. `ports_per_host`: {host index: how many ports to reserve there}. `files`:
    {name: text} written into the job directory on every host (the plan); the request travels on stdin."""
    here = host_agent.check({"script": None, "ports": 0, "job_dir": None})

    def check_one(index):
        wanted = ports_per_host.get(index, 0)
        request = json.dumps({"script": script, "ports": wanted + SPARE_PORTS if wanted else 0, "job_dir": job_dir,
                              "files": files or {}}) + "\n"
        return _check_host(spec.hosts[index], python, request, settings, here)

    results: Dict[int, HostReport] = {}
    errors = []
    indices = range(spec.num_hosts)
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, spec.num_hosts)) as pool:
        futures = {pool.submit(check_one, i): i for i in indices}
        for future in concurrent.futures.as_completed(futures):
            index = futures[future]
            try:
                results[index] = future.result()
                if progress:
                    progress(f"preflight: {spec.hosts[index].hostname} ok ({len(results)}/{spec.num_hosts})")
            except LaunchError as e:
                errors.append((index, e))
    if errors:
        errors.sort(key=lambda item: item[0])
        lines = "\n".join(f"  {e}" for _, e in errors)
        error = PreflightError(f"preflight failed on {len(errors)} of {spec.num_hosts} host(s); nothing was "
                               f"started:\n{lines}")
        error.causes = [e for _, e in errors]
        raise error
    kept = distinct_ports(spec, results, ports_per_host)
    for index, report in results.items():
        if spec.hosts[index].is_local:  # this machine's spare ports go back now; another host's claims expire
            for port in set(report.ports) - set(kept[index].ports):
                ports.release(port)
    return kept


def distinct_ports(spec, reports, ports_per_host):
    """`reports` with each host's ports cut to what it needs, none of them another host's (hosts in spec order
    take their first drawn ports that an earlier host did not take)."""
    taken, out = set(), {}
    for index in sorted(reports):
        wanted = ports_per_host.get(index, 0)
        mine = [p for p in reports[index].ports if p not in taken][:wanted]
        if len(mine) < wanted:
            raise LaunchError(f"{spec.hosts[index].hostname}: of the {len(reports[index].ports)} free ports drawn "
                              f"there, {len(mine)} are not another host's, and it needs {wanted}; start the job "
                              f"again (ports are drawn at random)")
        taken.update(mine)
        out[index] = dataclasses.replace(reports[index], ports=mine)
    return out


def _check_host(host, python, request, settings, here):
    """The HostReport of one host's agent, given `request`; a LaunchError naming the host for anything wrong."""
    argv = [python, *AGENT, "check", "-"]
    try:
        out = _run_here(argv, request) if host.is_local else ssh.run(settings, host, argv, stdin_text=request)
    except LaunchError as e:
        if "No module named" in str(e) and "parallax" in str(e):
            raise LaunchError(f"{host.hostname}: {python} cannot import parallax; install parallax for that "
                              f"Python on every host, or pass --python") from None
        raise
    try:
        report = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise LaunchError(f"{host.hostname}: the preflight check printed no report: {out[-300:]!r}") from None
    if report["parallax"] != here["parallax"]:
        report["errors"].append(f"{python} imports parallax from {report['parallax']}, the launcher from "
                                f"{here['parallax']}: install the same parallax at the same path everywhere")
    if report["errors"]:
        raise LaunchError(f"{host.hostname}: " + "; ".join(report["errors"]))
    return HostReport(report.get("ports", []), report["hostname"])


def _run_here(argv, stdin_text):
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, input=stdin_text)
    except FileNotFoundError:
        raise LaunchError(f"{argv[0]} does not exist here; pass --python") from None
    if result.returncode != 0:
        raise LaunchError(f"`{' '.join(argv[:3])}` failed here: {' '.join(result.stderr.split())[-400:]}")
    return result.stdout
