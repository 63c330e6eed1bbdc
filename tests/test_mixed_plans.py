"""benchmarks/mixed_plans.py: a plan counts as a fixed mode's when its methods and its local aggregation in effect
are the mode's, every plan is predicted, and a machine whose costs favour a mixed plan shows its gain."""
import dataclasses
import importlib.util
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), ROOT]
spec = importlib.util.spec_from_file_location("mixed_plans", os.path.join(ROOT, "benchmarks", "mixed_plans.py"))
mixed_plans = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mixed_plans)

from parallax.plan import cost_model as cm, plan_search# noqa: E402

MB = 1 << 20
MACHINE = cm.Machine(bandwidth=125e6, latency=1e-4, cores=2.0,
                     cpu_per_byte={"allreduce/tf": 1e-9, "allgather/tf": 1e-9, "ps": 1e-9},
                     cpu_per_message={"allreduce/tf": 1e-3, "allgather/tf": 1e-3, "ps": 1e-4})
TABLE = cm.VariableLoad("E", "sparse", 32 * MB, 0.01, 2)
KERNEL = cm.VariableLoad("K", "dense", MB, 1.0, 1, (1, MB))


def test_local_aggregation_counts_where_it_takes_effect():
    w = cm.Workload(0.01, 0.01, (KERNEL, TABLE))
    hybrid = plan_search.assign_servers(w, {"K": cm.AR, "E": cm.PS}, 2, True)
    methods = (("E", cm.PS), ("K", cm.AR))
    # with either backend it takes effect (TF's collectives hold a host's rows on its server)
    assert mixed_plans._key(w, hybrid, "tf") == mixed_plans._key(w, hybrid, "horovod") == (methods, True)
    no_aggregation = plan_search.assign_servers(w, {"K": cm.AR, "E": cm.PS}, 2, False)
    assert mixed_plans._key(w, no_aggregation, "tf") == (methods, False)
    # only a sparse variable on a server aggregates: all on servers but the table all-gathered has none
    dense_on_servers = plan_search.assign_servers(w, {"K": cm.PS, "E": cm.AG}, 2, True)
    assert mixed_plans._key(w, dense_on_servers, "horovod")[1] is False
    # every fixed mode, with its aggregation on and off, is one of the fixed plans
    fixed = mixed_plans.fixed_plans(w, 2, "horovod")
    assert sorted(set(fixed.values())) == ["HYBRID", "MPI", "PS"]
    assert fixed[(methods, True)] == fixed[(methods, False)] == "HYBRID"


def test_every_plan_is_predicted_and_the_best_of_each_kind_returned():
    w = cm.Workload(0.01, 0.01, (KERNEL, TABLE))
    (fixed, mode), (mixed, methods, _) = mixed_plans.best_plans(w, MACHINE, "tf")
    names = ("K", "E")
    every = []
    for k in (cm.AR, cm.PS):
        for e in (cm.AG, cm.PS):
            for la in (True, False):
                choices = plan_search.assign_servers(w, dict(zip(names, (k, e))), 2, la)
                every.append(cm.predict(w, choices, mixed_plans.PER_HOST, MACHINE, "tf").seconds)
    assert min(fixed, mixed) == min(every)
    assert mode in ("PS", "MPI", "HYBRID")
    assert methods in ({"K": cm.PS, "E": cm.AG},)  # the one method mix no fixed mode makes


def test_a_machine_where_servers_cost_less_per_byte_favours_a_mixed_plan():
    # a dense variable read many times is cheap only as a replica, and one read once is cheaper on the servers
    # when their bytes cost less CPU than the collectives'
    cheap_servers = dataclasses.replace(MACHINE, cpu_per_byte={"allreduce/tf": 4e-9, "allgather/tf": 4e-9,
                                                               "ps": 0.5e-9})
    w = cm.Workload(0.05, 0.05, (cm.VariableLoad("D", "dense", 16 * MB, 1.0, 2, (1, 16 * MB)),
                                 cm.VariableLoad("K", "dense", MB // 4, 1.0, 1, (64, 16 * MB))))
    (fixed, _), (mixed, methods, _) = mixed_plans.best_plans(w, cheap_servers, "tf")
    assert methods == {"D": cm.PS, "K": cm.AR}
    assert fixed / mixed > 1.05
    found = mixed_plans.sweep(cheap_servers, "tf")
    assert found["best"][0] >= fixed / mixed and found["count"] == len(list(mixed_plans.workloads()))


def test_the_zeroed_variants_remove_only_the_costs_they_name():
    machine = dataclasses.replace(MACHINE, cpu_per_step={"ps": 2e-3})
    variants = dict(mixed_plans.variants(machine, "tf"))
    assert variants["as calibrated"] == machine
    assert variants["a collective's fixed CPU 0"].cpu_per_message == {"allreduce/tf": 0.0, "allgather/tf": 0.0,
                                                                       "ps": 1e-4}
    assert variants["a server's fixed CPU 0"].cpu_per_step == {}
    assert variants["a server's fixed CPU 0"].cpu_per_message["ps"] == 0.0
    assert variants["both 0"].cpu_per_message == {"allreduce/tf": 0.0, "allgather/tf": 0.0, "ps": 0.0}
    assert variants["both 0"].cpu_per_byte == machine.cpu_per_byte
