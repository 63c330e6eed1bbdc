"""The launcher's check that the workers' inputs keep in step (plain Python): differing batches are warned about,
and an input that ends a step before another's ends the job with the reason, however the others learn of it."""
from parallax.launcher.input_ledger import MAX_WARNINGS, STRANDED_S, InputLedger


def _steps(ledger, steps, workers=("w0", "w1"), counts=(5,)):
    for step in steps:
        for w in workers:
            assert ledger.started(w, step) is None
            assert ledger.examples(w, step, counts) == (None, None)


def _both_in(ledger, step):
    """Both workers ran the steps before `step` on full batches, and started `step`."""
    _steps(ledger, range(1, step))
    ledger.started("w0", step)
    ledger.started("w1", step)


def test_equal_batches_and_an_end_in_the_same_step_pass_also_epoch_after_epoch():
    ledger = InputLedger()
    for epoch in range(3):
        first = 6 * epoch + 1
        _steps(ledger, range(first, first + 5))
        for w in ("w0", "w1"):
            assert ledger.started(w, first + 5) is None
            assert ledger.input_ended(w, first + 5, now=100.0 * epoch) is None
    assert ledger.stranded(now=1e6) is None and ledger.uneven_steps == 0


def test_differing_batches_are_warned_once_per_step_naming_the_counts():
    ledger = InputLedger()
    _both_in(ledger, 4)
    assert ledger.examples("w0", 4, (2,)) == (None, None)
    problem, warning = ledger.examples("w1", 4, (1,))
    assert problem is None
    assert "synchronized step 4 is not exactly one device's" in warning and "w0: 2, w1: 1 examples" in warning
    assert "drop_remainder=True" in warning
    assert ledger.examples("w2", 4, (1,)) == (None, None)  # the same step is not warned twice
    assert ledger.uneven_steps == 1


def test_warnings_stop_after_a_few_steps():
    ledger = InputLedger()
    said = []
    for step in range(1, MAX_WARNINGS + 3):
        ledger.examples("w0", step, (2,))
        said.append(ledger.examples("w1", step, (1,))[1])
    assert all(said[:MAX_WARNINGS]) and "later steps like it are not named" in said[MAX_WARNINGS - 1]
    assert said[MAX_WARNINGS:] == [None, None] and ledger.uneven_steps == MAX_WARNINGS + 2


def test_an_input_that_ends_while_another_had_a_batch_is_named_whichever_reports_first():
    ledger = InputLedger()
    _both_in(ledger, 5)
    assert ledger.input_ended("w1", 5, now=0.0) is None  # w0 may still end in step 5 too
    problem, _ = ledger.examples("w0", 5, (1,))
    assert problem.startswith("w1's input ended in synchronized step 5 (OutOfRangeError) while w0's still had")
    other = InputLedger()
    _both_in(other, 5)
    other.examples("w0", 5, (1,))
    assert "w1's input ended in synchronized step 5" in other.input_ended("w1", 5, now=0.0)
    late = InputLedger()
    _steps(late, range(1, 5))
    late.started("w1", 5)
    late.input_ended("w1", 5, now=0.0)
    late.started("w0", 5)
    assert "w1's input ended in synchronized step 5" in late.started("w0", 6)  # w0 ran step 5 on a batch


def test_a_worker_left_waiting_in_the_step_is_named_after_a_while_unless_it_stopped():
    ledger = InputLedger()
    _both_in(ledger, 3)
    ledger.input_ended("w1", 3, now=10.0)
    assert ledger.stranded(now=10.0 + STRANDED_S / 2) is None
    assert "w1's input ended in synchronized step 3" in ledger.stranded(now=10.0 + STRANDED_S + 1)
    ledger.stopped.add("w0")
    assert ledger.stranded(now=10.0 + STRANDED_S + 1) is None


def test_a_failure_in_the_step_an_input_ended_in_is_explained_by_it():
    ledger = InputLedger()
    _both_in(ledger, 3)
    ledger.input_ended("w1", 3, now=0.0)
    assert "w1's input ended in synchronized step 3" in ledger.behind("w0")
    assert ledger.behind("w1") is None
    ledger.input_ended("w0", 3, now=0.0)
    assert ledger.behind("w0") is None  # both ended: the failure is something else
