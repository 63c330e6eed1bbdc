"""The watchdog's rules, on a clock the test drives (watchdog.py); and its settings in Config and parallax-launch."""
import pytest

from parallax import Config, ResourceSpec
from parallax.errors import ConfigError, ParallaxError
from parallax.launcher import cli
from parallax.launcher.job import LaunchOptions, heartbeat_interval
from parallax.launcher.watchdog import FIRST_STEP_TIMEOUT_FLOOR_S, Watchdog

W0, W1, PS = "h0/worker/0", "h1/worker/1", "h0/ps/0"


def _dog(warning=10, timeout=60):
    dog = Watchdog([W0, W1], warning, timeout)
    for label in (W0, W1, PS):
        dog.up(label, 0)
    return dog


def _beat(dog, now, *labels):
    for label in labels:
        dog.heard(label, now)


def test_a_silent_process_is_warned_about_once_then_ends_the_job():
    dog = _dog()
    for t in range(1, 10):
        _beat(dog, t, W0, PS)
        assert dog.check(t) == ([], None)
    _beat(dog, 10, W0, PS)
    notes, failure = dog.check(10)
    assert notes == [f"stall: {W1} has sent nothing for 10 s (before its first synchronized step): it is stopped, "
                     f"hung, or cut off from the launcher; the job ends if this lasts {FIRST_STEP_TIMEOUT_FLOOR_S:g} s "
                     f"(stall_timeout_s)"]
    _beat(dog, 30, W0, PS)
    assert dog.check(30) == ([], None)  # said once
    _beat(dog, 60, W0, PS)
    assert dog.check(60) == ([], None)  # start-up: no sooner than a first step's floor
    _beat(dog, FIRST_STEP_TIMEOUT_FLOOR_S, W0, PS)
    notes, failure = dog.check(FIRST_STEP_TIMEOUT_FLOOR_S)
    assert failure == (f"{W1} has sent nothing for {FIRST_STEP_TIMEOUT_FLOOR_S:.0f} s (before its first synchronized "
                       f"step): it is stopped, hung, or cut off from the launcher; ended after "
                       f"{FIRST_STEP_TIMEOUT_FLOOR_S:g} s, a first step's least (stall_timeout_s=60)", W1)


def test_silence_after_the_first_step_ends_the_job_after_stall_timeout_s():
    dog = _dog()
    for label in (W0, W1):
        dog.step(label, 1, 0)
    for t in range(1, 60):
        _beat(dog, t, W0, PS)
        dog.step(W0, 1 + t, t)
    _beat(dog, 60, W0, PS)
    notes, failure = dog.check(60)
    assert failure == (f"{W1} has sent nothing for 60 s (its last synchronized step: 1; the furthest worker is in "
                       f"step 60): it is stopped, hung, or cut off from the launcher; ended after "
                       f"stall_timeout_s=60", W1)


def test_a_silent_server_is_named_as_a_server_and_its_return_is_said():
    dog = _dog()
    _beat(dog, 12, W0, W1)
    notes, _ = dog.check(12)
    assert len(notes) == 1 and notes[0].startswith(f"stall: {PS} has sent nothing for 12 s (a parameter server")
    _beat(dog, 15, PS)
    assert dog.check(15) == ([f"{PS} is heard again after 15 s"], None)


def test_start_up_does_not_end_the_job_while_every_process_beats_but_a_late_worker_is_named_once():
    """W1 restores a large checkpoint for 8 minutes before its first step, or is stuck there while it beats (a CI
    run of the GAN case in HYBRID on TF 2.21 was silent for 290 s so): W0 waits in step 1. The job goes on, and
    W1 is named once, warning_s after W0 started; when W1 starts, that is said."""
    dog = _dog()
    dog.step(W0, 1, 1)
    notes = []
    for t in range(2, 500, 2):
        _beat(dog, t, W0, W1, PS)
        said, failure = dog.check(t)
        assert failure is None
        notes += said
    assert notes == [f"stall: {W1} has not started a synchronized step 11 s after the first worker started step 1, "
                     f"where the others wait (building the graph, initializing or restoring a checkpoint may take "
                     f"this long; the job does not end for it, so stop it if it never starts)"]
    dog.step(W1, 1, 500)
    assert dog.check(500)[0] == ["every worker has started its steps after 499 s"]


def test_a_first_step_that_never_ends_is_said_and_ends_the_job():
    """Every worker in step 1, every process beating, nothing advancing (a release that is never sent): not silent,
    and not forever; but a first step may partition the graph or compile, so it ends the job no sooner than
    FIRST_STEP_TIMEOUT_FLOOR_S, however short stall_timeout_s is."""
    dog = _dog()
    for label in (W0, W1):
        dog.step(label, 1, 1)
    _beat(dog, 11, W0, W1, PS)
    notes, failure = dog.check(11)
    assert failure is None and len(notes) == 1
    assert notes[0].startswith("stall: no synchronized step started for 10 s: every running worker is in step 1 "
                               "(the first: if it compiles or restores for longer, raise stall_timeout_s)")
    assert notes[0].endswith(f"the job ends if this lasts {FIRST_STEP_TIMEOUT_FLOOR_S:g} s (stall_timeout_s)")
    for t in range(12, int(FIRST_STEP_TIMEOUT_FLOOR_S), 10):
        _beat(dog, t, W0, W1, PS)
        assert dog.check(t)[1] is None
    end = 1 + FIRST_STEP_TIMEOUT_FLOOR_S
    _beat(dog, end, W0, W1, PS)
    _, failure = dog.check(end)
    assert failure is not None and failure[0].endswith(
        f"ended after {FIRST_STEP_TIMEOUT_FLOOR_S:g} s, a first step's least (stall_timeout_s=60)")
    dog.step(W0, 2, end + 1)
    assert "steps advance again" in (dog.check(end + 1)[0] or [""])[0]


def test_a_later_step_ends_the_job_after_stall_timeout_s():
    dog = _dog()
    for step in (1, 2):
        for label in (W0, W1):
            dog.step(label, step, step)
    _beat(dog, 62, W0, W1, PS)
    _, failure = dog.check(62)
    assert failure is not None and failure[0].endswith("ended after stall_timeout_s=60")


def test_no_progress_names_the_workers_behind():
    dog = _dog()
    for step in (1, 2, 3):
        dog.step(W0, step, step)
        dog.step(W1, step, step)
    dog.step(W0, 4, 4)
    for t in range(5, 15):
        _beat(dog, t, W0, W1, PS)  # W1 beats but does not start step 4: its script is stuck between steps
    notes, failure = dog.check(14)
    assert notes == [f"stall: no synchronized step started for 10 s: {W1} (in step 3) has not reached step 4, where "
                     f"the others wait; the job ends if this lasts 60 s (stall_timeout_s)"]
    dog.step(W1, 4, 20)
    assert dog.check(20) == (["the workers' steps advance again after 16 s"], None)


def test_no_progress_with_every_worker_in_the_same_step_says_the_step_is_stuck():
    dog = _dog(warning=0, timeout=30)
    for step in (1, 2):
        dog.step(W0, step, step)
        dog.step(W1, step, step)
    for t in range(3, 33):
        _beat(dog, t, W0, W1, PS)
        notes, failure = dog.check(t)
        assert notes == []  # warnings off
    assert failure is not None and failure[1] is None
    assert "every running worker is in step 2 and every process still beats" in failure[0]


def test_finished_workers_owe_no_heartbeat_and_timeout_0_never_ends_the_job():
    dog = Watchdog([W0, W1], 10, 0)
    for label in (W0, W1):
        dog.up(label, 0)
        dog.step(label, 1, 0)
    dog.ended(W1, 1)
    dog.step(W0, 2, 1000)  # W0 goes on alone (a job may end its workers at different times)
    assert dog.check(1000) == ([], None)
    dog.up(PS, 1000)
    notes, failure = dog.check(5000)
    assert failure is None and len(notes) == 2 and "the job ends" not in notes[0]


@pytest.mark.parametrize("fields, message", [
    ({"stall_warning_s": -1}, "stall_warning_s=-1 must be a number of seconds >= 0"),
    ({"stall_timeout_s": "10"}, "stall_timeout_s='10' must be a number of seconds"),
    ({"stall_warning_s": 60, "stall_timeout_s": 30}, "stall_warning_s=60 must be below Config.stall_timeout_s=30"),
])
def test_config_refuses_bad_stall_limits(fields, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        Config(**fields)


def test_a_timeout_alone_brings_the_warning_before_it():
    """Config(stall_timeout_s=30) was a ConfigError: the default warning (60 s) was above it."""
    assert Config(stall_timeout_s=30).stall_warning() == 15
    assert Config().stall_warning() == 60 and Config(stall_timeout_s=0).stall_warning() == 60
    assert Config(stall_warning_s=5, stall_timeout_s=30).stall_warning() == 5
    config = Config()
    config.stall_timeout_s = 8  # assigned after construction, as scripts do: get_runner checks again
    config.check_combinations()
    assert config.stall_warning() == 4


def test_parallax_launch_with_a_stall_timeout_alone_warns_before_it(monkeypatch):
    seen = {}
    monkeypatch.setattr(cli, "plan_by_running", lambda spec, command, options: ("plan", {"stall_warning_s": 60.0,
                                                                                        "stall_timeout_s": 600.0}))
    monkeypatch.setattr(cli, "launch", lambda spec, command, options, plan, run_option: seen.update(o=options) or 0)
    args = cli.parser().parse_args(["-H", "localhost:1", "--stall-timeout", "20", "python", "x.py"])
    cli._launch(ResourceSpec.load("localhost:1"), args, ["python", "x.py"], LaunchOptions())
    assert (seen["o"].stall_warning_s, seen["o"].stall_timeout_s) == (10.0, 20.0)


def test_config_allows_turning_either_off():
    assert Config(stall_warning_s=0, stall_timeout_s=0).stall_timeout_s == 0
    assert Config(stall_warning_s=120, stall_timeout_s=0).stall_warning_s == 120


def test_launch_options_checked_and_heartbeats_follow_the_limits():
    with pytest.raises(ParallaxError, match="must come before the stall timeout"):
        cli._check_stall_limits(LaunchOptions(stall_warning_s=30, stall_timeout_s=30))
    with pytest.raises(ParallaxError, match="--stall-timeout -1"):
        cli._check_stall_limits(LaunchOptions(stall_timeout_s=-1))
    assert heartbeat_interval(LaunchOptions()) == 2.0
    assert heartbeat_interval(LaunchOptions(stall_warning_s=3, stall_timeout_s=10)) == 0.75
    assert heartbeat_interval(LaunchOptions(stall_warning_s=0, stall_timeout_s=0)) == 0
