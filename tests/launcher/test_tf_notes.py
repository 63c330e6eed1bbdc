"""Which of TensorFlow's log lines the console shows (launcher/tf_notes.py): each INFO statement once, each WARNING
once but for its numbers, with one sentence for the first warning hidden; errors and every other line always.
The same on a real job: tests/test_launcher.py::test_the_console_shows_each_of_tfs_info_lines_once_per_job."""
from parallax.launcher.tf_notes import TFNotes

RENDEZVOUS = ("W0000 00:00:1796514981.202208    7645 local_rendezvous.cc:412] Local rendezvous is aborting with "
              "status: ABORTED: Cleanup 130059958763275473 [type.googleapis.com/tensorflow.DerivedStatus='']")


def test_the_first_line_of_each_info_statement_passes():
    notes = TFNotes()
    first = "2026-12-04 20:22:41.090198: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on."
    absl = "I0000 00:00:1796413426.284160    3515 local_rendezvous.cc:405] Local rendezvous is aborting: Cleanup 7"
    assert not notes.repeated(first) and notes.repeated(first.replace("20:22:41", "20:22:42"))
    assert not notes.repeated(absl) and notes.repeated(absl.replace("Cleanup 7", "Cleanup 8"))
    assert notes.hidden_note(absl) is None  # INFO lines are hidden without a word


def test_a_warning_repeated_but_for_its_numbers_is_shown_once_and_said_once():
    notes = TFNotes()
    again = RENDEZVOUS.replace("7645", "7647").replace("130059958763275473", "130059958763275474")
    assert not notes.repeated(RENDEZVOUS) and notes.repeated(again) and notes.repeated(again)
    said = notes.hidden_note(again)
    assert "TensorFlow repeats its warning at local_rendezvous.cc:412" in said and "--log-dir" in said
    assert notes.hidden_note(again) is None
    # the same statement with another text is another warning: it passes
    other = RENDEZVOUS.replace("ABORTED: Cleanup 130059958763275473", "INVALID_ARGUMENT: Matrix size-incompatible")
    assert not notes.repeated(other)
    tf215 = "2026-12-04 20:22:41.090198: W tensorflow/core/kernels/x.cc:9] something a user must see 3"
    assert not notes.repeated(tf215) and notes.repeated(tf215.replace("see 3", "see 4"))


def test_errors_and_other_lines_always_pass():
    notes = TFNotes()
    error = "E0000 00:00:1796514980.187307    7293 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)"
    for line in (error, error, "epoch 1 done", "epoch 1 done", "W: not TF's format"):
        assert not notes.repeated(line)
