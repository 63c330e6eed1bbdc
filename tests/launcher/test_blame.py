"""blame.py: whom a failed job's report names, rule by rule, without starting a process (the races that produce the
evidence are test_supervisor_blame.py's)."""
from parallax.launcher.blame import Evidence, Verdict, blame

W0, W1, PS0 = "h/worker/0", "h/worker/1", "h/ps/0"
LOST = "UnavailableError: Connection reset by peer"


def test_a_job_that_ended_well_blames_nobody():
    assert blame(Evidence()) == Verdict(0)


def test_a_signal_wins_over_every_failure():
    assert blame(Evidence(signal=15, first_failure=(W0, LOST), main_exit=1)) == Verdict(143)


def test_a_dead_server_is_the_cause_though_the_workers_it_left_failed_first():
    verdict = blame(Evidence(dead_service=(PS0, -9), first_failure=(W0, LOST), step_problem=None))
    assert verdict.code == 1 and verdict.label == PS0 and verdict.what.startswith(f"{PS0} was killed by signal 9")


def test_a_ledger_problem_comes_before_the_failures_teardown_caused():
    verdict = blame(Evidence(step_problem="worker 1 ran another step", first_failure=(W0, LOST), main_exit=1))
    assert verdict == Verdict(1, "worker 1 ran another step", None)


def test_the_watchdog_names_its_process():
    assert blame(Evidence(stalled=("no step for 600 s", W1))) == Verdict(1, "no step for 600 s", W1)


def test_a_worker_that_died_without_a_word_is_the_cause_of_the_first_reported_failure():
    verdict = blame(Evidence(first_failure=(W0, LOST), silent_death=(W1, "was killed by signal 9 (SIGKILL)")))
    assert verdict == Verdict(1, f"{W1} was killed by signal 9 (SIGKILL); then {W0}: {LOST}", W1)


def test_the_earliest_failure_is_named_first_or_after_the_input_it_waited_for():
    assert blame(Evidence(first_failure=(W0, "ValueError: x"))) == Verdict(1, f"{W0} failed first: ValueError: x", W0)
    behind = blame(Evidence(first_failure=(W0, LOST), behind="worker 1's input ended at step 4"))
    assert behind.what == f"worker 1's input ended at step 4; then {W0}: {LOST}"


def test_a_failed_rank_without_a_report_is_named_by_mpirun_or_said_to_be_a_worker():
    assert blame(Evidence(main_exit=3, failed_rank=(W1, "exited with code 3"))) == \
        Verdict(3, f"{W1} exited with code 3", W1)
    assert blame(Evidence(main_exit=-11)) == Verdict(1, "a worker failed (mpirun exit status -11)", None)
