"""Whom a failed job's report names, from what the supervisor knew when the job ended: a pure function of the
evidence, so that every race between the processes' last lines can be tested without starting one.

The order of the rules is the point. A signal to the launcher ends the job whatever else happened. A parameter
server only serves, so a server that died is the cause even when the workers it left failed first. A ledger's
problem (the workers' steps or inputs disagree) and a problem decided before teardown come next: the failures
teardown causes come after them. Of the workers' own reports, the earliest names the job's failure, unless a worker
died without a word (a signal, a bare exit) in that moment: the others' broken collectives follow from it.
"""
import dataclasses
from typing import Optional, Tuple

from parallax.launcher.rank_output import describe_exit


@dataclasses.dataclass(frozen=True)
class Evidence:
    signal: Optional[int] = None  # the signal that stopped the launcher
    dead_service: Optional[Tuple[str, int]] = None  # (label, exit status) of a service that died
    step_problem: Optional[str] = None  # the step or input ledger's: the workers disagree
    message: Optional[str] = None  # a problem decided before teardown (start-up timed out)
    stalled: Optional[Tuple[str, Optional[str]]] = None  # the watchdog's (what, the process it names)
    first_failure: Optional[Tuple[str, str]] = None  # (label, what) of the earliest failure a worker reported
    silent_death: Optional[Tuple[str, Optional[str]]] = None  # (label, how) of a worker that ended without a word
    behind: Optional[str] = None  # the input ledger's: the worker whose ended input first_failure's step waited for
    main_exit: int = 0  # mpirun's (or spawn's) exit status
    failed_rank: Optional[Tuple[Optional[str], Optional[str]]] = None  # (label, how) of the rank mpirun names


@dataclasses.dataclass(frozen=True)
class Verdict:
    code: int  # the job's exit status
    what: Optional[str] = None  # the failure, for the report (None: the job succeeded, or a signal stopped it)
    label: Optional[str] = None  # the process whose last lines the report shows (None: mpirun's)


def blame(evidence):
    """The Verdict on a job that ended with `evidence` (module docstring)."""
    e = evidence
    if e.signal is not None:
        return Verdict(128 + e.signal)
    if e.dead_service is not None:
        label, code = e.dead_service
        return Verdict(1, f"{label} {describe_exit(code)} while the workers ran", label)
    for what in (e.step_problem, e.message):
        if what:
            return Verdict(1, what)
    if e.stalled is not None:
        return Verdict(1, *e.stalled)
    if e.first_failure is not None:
        label, what = e.first_failure
        if e.silent_death is not None:
            dead, detail = e.silent_death
            return Verdict(1, f"{dead} {detail or 'ended'}; then {label}: {what}", dead)
        return Verdict(1, f"{e.behind}; then {label}: {what}" if e.behind else f"{label} failed first: {what}", label)
    if e.main_exit != 0:
        label, detail = e.failed_rank or (None, None)
        detail = detail or f"failed (mpirun exit status {e.main_exit})"
        return Verdict(e.main_exit if e.main_exit > 0 else 1, f"{label or 'a worker'} {detail}", label)
    return Verdict(0)
