"""PARALLAX_MEASURE_STEPS (step_measure.py): what parallax-calibrate sets to have a real job measure its steps and
end after them. The whole path (a job in each mode, its reports) runs in test_calibrate_cli.py."""
import pytest

from parallax.runtime import step_measure
from parallax.errors import ConfigError


def test_unset_measures_nothing():
    assert step_measure.StepMeasure.from_env({}) is None


def test_warm_up_and_last_step_are_read():
    m = step_measure.StepMeasure.from_env({step_measure.ENV: "10,30"})
    assert (m.first, m.last) == (10, 30)


@pytest.mark.parametrize("text", ["30", "a,b", "30,10", "5,5", "-1,4"])
def test_a_bad_setting_says_what_is_expected(text):
    with pytest.raises(ConfigError, match="W,K|0 <= W < K"):
        step_measure.StepMeasure.from_env({step_measure.ENV: text})


def test_the_machine_counter_moves_with_work():
    before = step_measure.machine_busy()
    sum(i * i for i in range(2_000_000))
    assert step_measure.machine_busy() > before
