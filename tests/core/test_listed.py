"""A listed value (core/listed.py): two fields, read as fields; printed and compared as the sentence warnings show."""
import copy
import dataclasses
import pickle

from parallax.core.listed import Listed
from parallax.plan import plan_json
from parallax.plan.records import Plan


def test_a_listed_value_reads_as_its_sentence_and_keeps_its_fields():
    listed = Listed("Sum:0", "no law combines it")
    assert listed == "Sum:0 (no law combines it)" and f"{listed}: each worker's own".startswith("Sum:0 (no law")
    assert (listed.what, listed.why) == ("Sum:0", "no law combines it")
    for again in (copy.deepcopy(listed), pickle.loads(pickle.dumps(listed))):
        assert type(again) is Listed and (again.what, again.why) == (listed.what, listed.why)


def test_the_plan_keeps_listed_fields_through_json_and_a_sentence_given_whole_stays_whole():
    plan = Plan("MPI", 2, 1, (), uncombinable_statistics=(Listed("a:0", "why a"), "b:0 (given whole)"))
    a, b = plan.uncombinable_statistics
    assert (a.what, a.why) == ("a:0", "why a") and (b.what, b.why) == ("b:0 (given whole)", None)
    loaded = plan_json.loads(plan_json.dumps(plan))
    assert loaded == plan and [(e.what, e.why) for e in loaded.uncombinable_statistics] == [(a.what, a.why),
                                                                                             (b.what, b.why)]
    assert dataclasses.replace(loaded, num_workers=3).uncombinable_statistics[0].why == "why a"
