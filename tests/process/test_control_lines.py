"""control_lines.py: every record a process writes reads back as itself; what is not one is said so."""
import pytest

from parallax.process import control_lines as cl

RECORDS = [cl.Up("host-a", 4242), cl.Alive(), cl.Serving(), cl.Failed(1733400000.123456, "ValueError: bad batch x"),
           cl.Exit(-9), cl.Exit(3), cl.Step(7, "ab12", "train_op"), cl.Examples(2, (64, 0, 5)), cl.Fed(1, "ff00"),
           cl.InputEnd(12), cl.Done(40)]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_a_record_reads_back_from_its_line(record):
    line = cl.line(record)
    assert line.startswith(cl.PREFIX) and cl.is_control(line)
    assert cl.parse(line) == record


def test_the_time_of_a_failure_keeps_microseconds_and_its_message_its_spaces():
    parsed = cl.parse(cl.line(cl.Failed(12.5000004, "CollectiveError: worker 1 left: step 3")))
    assert parsed.time == pytest.approx(12.5, abs=1e-6) and parsed.what == "CollectiveError: worker 1 left: step 3"


@pytest.mark.parametrize("text", ["parallax-control: exit", "parallax-control: exit x", "parallax-control: done 1 2",
                                  "parallax-control: step 3", "parallax-control: teleport 3", "parallax-control:"])
def test_a_control_line_this_version_cannot_read_is_none_but_still_control(text):
    assert cl.is_control(text) and cl.parse(text) is None


def test_a_plain_line_is_no_control_line():
    assert not cl.is_control("step 3 ab train_op") and cl.parse("step 3 ab train_op") is None
