"""The cost model (parallax/plan/cost_model.py): Table 3's bytes per host link and per server, and the two time
bounds."""
import dataclasses

import pytest

from parallax.plan import cost_model as cm

TWO_BY_TWO = (2, 2)
NET = cm.Machine(bandwidth=1e8, latency=1e-4, cores=64, cpu_per_byte={}, cpu_per_message={})


def _workload(*variables, compute=0.1):
    return cm.Workload(compute, compute, tuple(variables))


def test_allreduce_moves_two_n_minus_one_over_n_b_over_each_link():
    w = _workload(cm.VariableLoad("w", "dense", 1_000_000))
    p = cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, NET)
    assert p.link_bytes == pytest.approx((1.5e6, 1.5e6))
    assert p.seconds == pytest.approx(0.1 + 1.5e6 / 1e8 + 6 * 1e-4)


def test_allgather_moves_n_minus_one_a_b():
    w = _workload(cm.VariableLoad("e", "sparse", 1_000_000, alpha=0.01))
    p = cm.predict(w, {"e": cm.Choice(cm.AG)}, TWO_BY_TWO, NET)
    assert p.link_bytes == pytest.approx((3 * 0.01 * 1e6,) * 2)


def test_the_allgathered_variables_share_one_collective():
    """collective_passes gathers every sparse variable's rows in one collective: the bytes add up, the per-message CPU
    and the ring's rounds are paid once."""
    machine = dataclasses.replace(NET, cpu_per_message={"allgather/tf": 1e-3})
    tables = [cm.VariableLoad(f"e{k}", "sparse", 1_000_000, alpha=0.01) for k in range(3)]
    one, three = (cm.predict(_workload(*tables[:k]), {v.name: cm.Choice(cm.AG) for v in tables[:k]}, TWO_BY_TWO,
                             machine) for k in (1, 3))
    assert three.link_bytes == pytest.approx(tuple(3 * b for b in one.link_bytes))
    assert three.host_cpu == pytest.approx(one.host_cpu)  # 2 workers a host, one message each
    assert three.seconds - one.seconds == pytest.approx(2 * (3 * 0.01 * 1e6) / 1e8)  # the bytes' time only


def test_each_statistic_of_the_batch_is_one_gather_in_every_mode_and_keeps_local_aggregation():
    """Batch norm's statistics are gathered in PS mode too (TF's collectives), so the step pays each gather's
    rounds and bytes; local aggregation stays (its rows are held on the host's server)."""
    emb = cm.VariableLoad("e", "sparse", 1_000_000, alpha=0.01)
    plain, with_statistics = _workload(emb), cm.Workload(0.1, 0.1, (emb,), statistics=(4_000, 4_000))
    choices = {"e": cm.Choice(cm.PS, (0,), local_aggregation=True)}
    before, after = (cm.predict(w, choices, TWO_BY_TWO, NET) for w in (plain, with_statistics))
    # two gathers of 3 other workers' 4 kB each, one round of 3 latencies each, and the fence's gather
    assert after.link_bytes[0] - before.link_bytes[0] == pytest.approx(2 * 3 * 4_000, rel=0.05)
    assert after.seconds - before.seconds >= 2 * 3 * 1e-4 + 2 * 3 * 4_000 / 1e8
    machine = dataclasses.replace(NET, cpu_per_message={"ps": 1e-3})
    without_la = {"e": cm.Choice(cm.PS, (0,), local_aggregation=False)}
    assert cm.predict(with_statistics, choices, TWO_BY_TWO, machine).host_cpu == \
        cm.predict(plain, choices, TWO_BY_TWO, machine).host_cpu != \
        cm.predict(plain, without_la, TWO_BY_TWO, machine).host_cpu


def test_a_server_on_one_host_is_hot_and_its_link_carries_the_other_hosts_pushes_and_pulls():
    w = _workload(cm.VariableLoad("w", "dense", 1_000_000))
    one = cm.predict(w, {"w": cm.Choice(cm.PS, (0,))}, TWO_BY_TWO, NET)
    assert one.link_bytes == pytest.approx((2e6, 2e6))  # host 1's two workers push b each and pull b each
    assert one.server_bytes == pytest.approx((8e6, 0))  # 4 workers, in and out
    split = cm.predict(_workload(cm.VariableLoad("w", "dense", 1_000_000, parts=2)),
                       {"w": cm.Choice(cm.PS, (0, 1))}, TWO_BY_TWO, NET)
    assert split.server_bytes == pytest.approx((4e6, 4e6)) and split.link_bytes == pytest.approx((2e6, 2e6))


def test_a_server_step_costs_each_process_once_and_each_variable_its_messages():
    machine = cm.Machine(1e12, 0, cores=1, cpu_per_byte={}, cpu_per_message={"ps": 1e-3}, cpu_per_step={"ps": 1e-2})
    few = _workload(cm.VariableLoad("a", "dense", 8), compute=0.0)
    many = _workload(*(cm.VariableLoad(f"v{i}", "dense", 8) for i in range(10)), compute=0.0)
    on_host_0 = lambda w: {v.name: cm.Choice(cm.PS, (0,)) for v in w.variables}  # noqa: E731
    one, ten = (cm.predict(w, on_host_0(w), TWO_BY_TWO, machine).host_cpu for w in (few, many))
    # host 0: 2 workers and 1 server pay the step once each; every variable's push and pull is a message on both
    # ends (4 workers' pushes and pulls at the server, 2 workers' own at host 0, 2 at host 1)
    assert one == pytest.approx((3e-2 + 12e-3, 2e-2 + 4e-3))
    assert ten == pytest.approx((3e-2 + 120e-3, 2e-2 + 40e-3))


def test_the_cpu_bound_wins_when_every_process_shares_few_cores():
    machine = cm.Machine(1e9, 1e-5, cores=1, cpu_per_byte={"allreduce/tf": 1e-8}, cpu_per_message={})
    w = _workload(cm.VariableLoad("w", "dense", 10_000_000), compute=0.2)
    p = cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, machine)
    per_worker = 1e-8 * 2 * 1.5e7
    assert p.bound == "cpu" and p.cpu_bound == pytest.approx(2 * (0.2 + per_worker))
    assert p.seconds == p.cpu_bound > p.critical_path


def test_the_step_combines_its_two_bounds_by_the_machines_measured_overlap():
    assert cm.combine_bounds(0.03, 0.04) == 0.04  # perfect overlap: the larger bound
    assert cm.combine_bounds(0.03, 0.04, 1.0) == pytest.approx(0.07)  # none: they add
    assert cm.combine_bounds(0.03, 0.04, 2.0) == pytest.approx(0.05)
    assert cm.combine_bounds(0.0, 0.0, 2.0) == 0.0
    # Bounds far apart barely interact; equal bounds lose most to the lack of overlap
    assert cm.combine_bounds(0.01, 0.1, 3.0) / 0.1 < 1.001 < 1.25 < cm.combine_bounds(0.1, 0.1, 3.0) / 0.1
    machine = cm.Machine(1e9, 1e-5, cores=1, cpu_per_byte={"allreduce/tf": 1e-8}, cpu_per_message={})
    w = _workload(cm.VariableLoad("w", "dense", 10_000_000), compute=0.2)
    perfect = cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, machine)
    partial = cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, dataclasses.replace(machine, overlap_exponent=2.0))
    assert (partial.critical_path, partial.cpu_bound, partial.bound) == \
        (perfect.critical_path, perfect.cpu_bound, perfect.bound)
    assert partial.seconds == pytest.approx((perfect.critical_path ** 2 + perfect.cpu_bound ** 2) ** 0.5)
    assert partial.seconds > perfect.seconds == perfect.cpu_bound


def test_one_worker_moves_nothing():
    w = _workload(cm.VariableLoad("w", "dense", 10_000_000))
    assert cm.predict(w, {"w": cm.Choice(cm.AR)}, (1,), NET).seconds == pytest.approx(0.1)




def test_hosts_on_one_machine_share_its_cores():
    w = _workload(cm.VariableLoad("w", "dense", 1000), compute=0.2)
    apart = cm.Machine(1e9, 0, cores=2, cpu_per_byte={}, cpu_per_message={})
    together = cm.Machine(1e9, 0, cores=2, cpu_per_byte={}, cpu_per_message={}, machine_of_host=(0, 0))
    assert cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, apart).cpu_bound == pytest.approx(0.2)
    assert cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, together).cpu_bound == pytest.approx(0.4)


def test_a_workers_server_messages_of_one_round_overlap_up_to_its_cores():
    many = _workload(*(cm.VariableLoad(f"v{i}", "dense", 8) for i in range(10)), compute=0.0)
    on_host_1 = {v.name: cm.Choice(cm.PS, (1,)) for v in many.variables}
    wide = cm.Machine(1e12, 0, cores=64, cpu_per_byte={}, cpu_per_message={"ps": 1e-3})
    narrow = dataclasses.replace(wide, cores=2)
    # two rounds (push, pull), each as long as its largest message, or its messages over the cores; between them
    # the busiest part's server takes the four workers' pushes one after another
    assert cm.predict(many, on_host_1, TWO_BY_TWO, wide).critical_path == pytest.approx(2 * 1e-3 + 4 * 1e-3)
    assert cm.predict(many, on_host_1, TWO_BY_TWO, narrow).critical_path == pytest.approx(2 * 10 * 1e-3 / 2 + 4e-3)


def test_the_step_waits_for_the_busiest_parts_serial_work_so_partitions_help():
    machine = cm.Machine(1e12, 0, cores=64, cpu_per_byte={"ps": 1e-9}, cpu_per_message={}, update_cpu_per_byte=1e-9)
    whole, split = (_workload(cm.VariableLoad("e", "sparse", 10**8, 0.01, parts=k), compute=0.0) for k in (1, 2))
    one = cm.predict(whole, {"e": cm.Choice(cm.PS, (0,))}, TWO_BY_TWO, machine).critical_path
    two = cm.predict(split, {"e": cm.Choice(cm.PS, (0, 1))}, TWO_BY_TWO, machine).critical_path
    rows = 0.01 * 10**8  # one worker's rows of the whole variable
    # pushes: 4 workers' rows taken in turn; the update: the rows the 4 workers touch; plus each worker's round trip
    assert one == pytest.approx(4 * rows * 1e-9 + 4 * rows * 1e-9 + 2 * rows * 1e-9, rel=1e-3)  # and the link
    assert two == pytest.approx(one / 2, rel=1e-3)


def test_tf_collectives_with_servers_fence_the_step_and_keep_local_aggregation():
    machine = cm.Machine(1e12, 0, cores=64, cpu_per_byte={"ps": 1e-6},
                         cpu_per_message={"allreduce/tf": 1e-3, "allreduce/horovod": 1e-3, "allgather/tf": 1e-3,
                                          "ps": 1e-4},
                         round_seconds={"allreduce/tf": 1e-2, "allreduce/horovod": 1e-2, "allgather/tf": 1e-2,
                                        "ps": 0.0})
    w = _workload(cm.VariableLoad("d", "dense", 8), cm.VariableLoad("e", "sparse", 800, 0.5), compute=0.0)
    mixed = {"d": cm.Choice(cm.AR), "e": cm.Choice(cm.PS, (0,), local_aggregation=True)}
    tf, horovod = (cm.predict(w, mixed, TWO_BY_TWO, machine, backend) for backend in ("tf", "horovod"))
    # the fence: one more gather per worker (4 x 1 ms of CPU) and its 3 rounds of 10 ms (an allreduce's would be 6)
    assert tf.critical_path - horovod.critical_path == pytest.approx(1e-3 + 3 * 1e-2)
    # both take the host's local hop (with tf, the rows are held on the host's server): the fence's CPU apart,
    # the hosts spend the same, and more than without it
    no_hop = dict(mixed, e=cm.Choice(cm.PS, (0,)))
    assert sum(tf.host_cpu) == pytest.approx(sum(horovod.host_cpu) + 4 * 1e-3)
    assert sum(horovod.host_cpu) > sum(cm.predict(w, no_hop, TWO_BY_TWO, machine, "horovod").host_cpu)
    only_servers = {"d": cm.Choice(cm.PS, (0,)), "e": mixed["e"]}
    assert cm.predict(w, only_servers, TWO_BY_TWO, machine, "tf") == \
        cm.predict(w, only_servers, TWO_BY_TWO, machine, "horovod")  # no collective: no fence, aggregation kept


def test_each_method_waits_its_own_measured_round_time():
    w = _workload(cm.VariableLoad("w", "dense", 8), compute=0.0)
    machine = cm.Machine(1e12, 5e-3, cores=64, cpu_per_byte={}, cpu_per_message={}, round_seconds={"ps": 1e-3})
    assert cm.predict(w, {"w": cm.Choice(cm.PS, (1,))}, TWO_BY_TWO, machine).critical_path == pytest.approx(3e-3)
    assert cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, machine).critical_path == pytest.approx(6 * 5e-3)


def test_a_methods_transport_may_get_less_of_the_link():
    w = _workload(cm.VariableLoad("w", "dense", 1_000_000), compute=0.0)
    full = cm.Machine(1e8, 0, cores=64, cpu_per_byte={}, cpu_per_message={})
    half_for_grpc = dataclasses.replace(full, link_bandwidth={"ps": 5e7})
    on_host_0 = {"w": cm.Choice(cm.PS, (0,))}
    assert cm.predict(w, on_host_0, TWO_BY_TWO, half_for_grpc).critical_path == \
        pytest.approx(2 * cm.predict(w, on_host_0, TWO_BY_TWO, full).critical_path)
    ring = {"w": cm.Choice(cm.AR)}
    assert cm.predict(w, ring, TWO_BY_TWO, half_for_grpc) == cm.predict(w, ring, TWO_BY_TWO, full)


def test_state_on_servers_costs_its_messages_and_none_without_servers():
    machine = cm.Machine(1e12, 0, cores=1, cpu_per_byte={}, cpu_per_message={"ps": 1e-3})
    stats = (cm.StateLoad("bn/moving_mean", 64, averaged=True), cm.StateLoad("global_step", 8))
    plain = _workload(cm.VariableLoad("w", "dense", 8), compute=0.0)
    with_state = dataclasses.replace(plain, state=stats)
    on_server = {"w": cm.Choice(cm.PS, (0,))}
    before, after = (cm.predict(w, on_server, TWO_BY_TWO, machine) for w in (plain, with_state))
    # placed by plan._place_state's balance: w's server (host 0) is loaded, so the largest state goes to host 1,
    # then the global step to host 0. Averaged statistics: 4 workers' values (2 per host, both ends) + the chief's
    # write at the server; the global step: the chief's write (host 0 to its own server, both ends).
    extra = [a - b for a, b in zip(after.host_cpu, before.host_cpu)]
    assert extra == pytest.approx((2e-3 + 2e-3, 2e-3 + 4e-3 + 1e-3))
    assert after.server_bytes[1] - before.server_bytes[1] == pytest.approx(4 * 64)
    replicated = {"w": cm.Choice(cm.AR)}
    assert cm.predict(with_state, replicated, TWO_BY_TWO, machine) == cm.predict(plain, replicated, TWO_BY_TWO,
                                                                                  machine)


def test_state_follows_the_variable_it_is_colocated_with():
    machine = cm.Machine(1e12, 0, cores=1, cpu_per_byte={}, cpu_per_message={"ps": 1e-3})
    w = cm.Workload(0.0, 0.0, (cm.VariableLoad("a", "dense", 8), cm.VariableLoad("b", "dense", 8, parts=2)),
                    (cm.StateLoad("a/ema", 8, colocated_with="a"), cm.StateLoad("b/ema", 8, colocated_with="b/part_1"),
                     cm.StateLoad("b/beta_power", 8, colocated_with="b", optimizer=True)))
    on_servers = cm.predict(w, {"a": cm.Choice(cm.PS, (1,)), "b": cm.Choice(cm.PS, (0, 1))}, TWO_BY_TWO, machine)
    plain = cm.predict(dataclasses.replace(w, state=()), {"a": cm.Choice(cm.PS, (1,)), "b": cm.Choice(cm.PS, (0, 1))},
                       TWO_BY_TWO, machine)
    # a/ema and b/part_1's EMA beside their variables on host 1's server, the beta power beside b's first part
    assert [x - y for x, y in zip(on_servers.server_bytes, plain.server_bytes)] == pytest.approx((8, 16))
    # beside a replica, an EMA shadow stays replicated (no message); optimizer state still goes to a server
    mixed = {"a": cm.Choice(cm.AR), "b": cm.Choice(cm.PS, (0, 1))}
    mixed_state = cm.predict(w, mixed, TWO_BY_TWO, machine).server_bytes
    mixed_plain = cm.predict(dataclasses.replace(w, state=()), mixed, TWO_BY_TWO, machine).server_bytes
    assert sum(mixed_state) - sum(mixed_plain) == pytest.approx(16)


def test_state_colocated_with_state_on_a_server_goes_with_it():
    """Batch renormalization's moving deviation, colocated with the moving variance, costs messages on that
    variance's server (plan._place_state keeps the two together)."""
    machine = cm.Machine(1e12, 0, cores=1, cpu_per_byte={}, cpu_per_message={"ps": 1e-3})
    w = cm.Workload(0.0, 0.0, (cm.VariableLoad("a", "dense", 8),),
                    (cm.StateLoad("bn/moving_variance", 64), cm.StateLoad("bn/moving_stddev", 8,
                                                                        colocated_with="bn/moving_variance")))
    on_servers = {"a": cm.Choice(cm.PS, (1,))}
    with_state = cm.predict(w, on_servers, TWO_BY_TWO, machine).server_bytes
    plain = cm.predict(dataclasses.replace(w, state=()), on_servers, TWO_BY_TWO, machine).server_bytes
    assert [x - y for x, y in zip(with_state, plain)] == pytest.approx((72, 0))


def test_pushes_and_pulls_are_phases_so_an_unbalanced_servers_link_is_busy_twice():
    one_each = (1, 1)
    net = cm.Machine(bandwidth=1e6, latency=0, cores=64, cpu_per_byte={}, cpu_per_message={})
    w = _workload(cm.VariableLoad("a", "dense", 1_000_000), cm.VariableLoad("b", "dense", 1_000_000), compute=0.0)
    # balanced: each phase moves 1 MB each way on both links at once, 1 s per phase
    balanced = cm.predict(w, {"a": cm.Choice(cm.PS, (0,)), "b": cm.Choice(cm.PS, (1,))}, one_each, net)
    assert balanced.link_seconds == pytest.approx(2.0)
    # both on host 0's server: host 1's worker pushes 2 MB to it (host 1 out, host 0 in), then pulls 2 MB back
    # (host 0 out); per direction the step moves 2 MB, as balanced, but one direction idles in each phase
    hot = cm.predict(w, {"a": cm.Choice(cm.PS, (0,)), "b": cm.Choice(cm.PS, (0,))}, one_each, net)
    assert hot.link_bytes == balanced.link_bytes == pytest.approx((2e6, 2e6))
    assert hot.link_seconds == pytest.approx(4.0)


def test_a_links_burst_passes_at_once_up_to_what_the_idle_link_refills():
    w = _workload(cm.VariableLoad("w", "dense", 1_000_000), compute=0.1)
    plain = cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, NET)
    assert plain.link_seconds == pytest.approx(1.5e6 / 1e8)
    burst = dataclasses.replace(NET, link_burst=500_000)
    assert cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, burst).link_seconds == pytest.approx(1e6 / 1e8)
    # a bucket deeper than the step's traffic: the link time is gone, not negative
    deep = dataclasses.replace(NET, link_burst=10_000_000)
    assert cm.predict(w, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, deep).link_seconds == 0.0
    # the bucket refills at the link's rate only while the step does anything else: 1 ms here (compute and rounds)
    busy = cm.Workload(0.0004, 0.0004, w.variables)
    refilled = cm.predict(busy, {"w": cm.Choice(cm.AR)}, TWO_BY_TWO, deep)
    assert refilled.link_seconds == pytest.approx(1.5e6 / 1e8 - (0.0004 + 6 * 1e-4))


def test_a_burst_is_spent_once_per_direction_over_both_phases():
    one_each = (1, 1)
    net = cm.Machine(bandwidth=1e6, latency=0, cores=64, cpu_per_byte={}, cpu_per_message={}, link_burst=250_000)
    w = _workload(cm.VariableLoad("a", "dense", 1_000_000), cm.VariableLoad("b", "dense", 1_000_000), compute=10.0)
    # balanced servers: each phase uses every direction; the bucket's 0.25 s goes to the pushes, none to the pulls
    balanced = cm.predict(w, {"a": cm.Choice(cm.PS, (0,)), "b": cm.Choice(cm.PS, (1,))}, one_each, net)
    assert balanced.link_seconds == pytest.approx(2.0 - 0.25)
    # one hot server: each phase uses other directions, so each phase has its own full bucket
    hot = cm.predict(w, {"a": cm.Choice(cm.PS, (0,)), "b": cm.Choice(cm.PS, (0,))}, one_each, net)
    assert hot.link_seconds == pytest.approx(4.0 - 0.5)
