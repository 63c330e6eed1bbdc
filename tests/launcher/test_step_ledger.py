"""The launcher's check that every worker runs the same sequence of synchronized steps (plain Python)."""
from parallax.launcher.step_ledger import StepLedger


def test_the_same_sequence_passes():
    ledger = StepLedger()
    for step in range(1, 6):
        for worker in ("w0", "w1"):
            assert ledger.started(worker, step, "a" if step % 2 else "b", "train") is None
    assert ledger.finished("w0", 5) is None and ledger.finished("w1", 5) is None


def test_another_fetch_at_the_same_step_names_step_and_workers():
    ledger = StepLedger()
    assert ledger.started("localhost/worker/0", 1, "aaa", "train_a") is None
    problem = ledger.started("localhost/worker/1", 1, "bbb", "train_b")
    assert "at synchronized step 1" in problem and "localhost/worker/0 runs train_a" in problem
    assert "localhost/worker/1 runs train_b" in problem


def test_a_worker_that_stops_early_is_named_whichever_reports_first():
    ledger = StepLedger()
    for step in (1, 2):
        ledger.started("w0", step, "a", "train")
        ledger.started("w1", step, "a", "train")
    assert ledger.started("w0", 3, "a", "train") is None
    assert ledger.finished("w1", 2) == ("w1 stopped after 2 synchronized steps while w0 waits in step 3: every "
                                        "worker must run the same number of synchronized steps")
    other = StepLedger()
    other.started("w0", 1, "a", "train")
    other.started("w1", 1, "a", "train")
    assert other.finished("w1", 1) is None
    assert "w1 stopped after 1 synchronized steps while w0 waits in step 2" in other.started("w0", 2, "a", "train")


def test_when_a_worker_dies_the_others_places_are_named():
    ledger = StepLedger()
    assert ledger.others_at("w1") is None  # nobody started a synchronized step yet
    for w in ("w0", "w1", "w2"):
        ledger.started(w, 1, "a", "train")
    ledger.started("w0", 2, "b", "loss")
    ledger.finished("w2", 1)
    assert ledger.others_at("w1") == ("w0 was in synchronized step 2 (loss), whose collectives and barriers need "
                                      "every worker")
