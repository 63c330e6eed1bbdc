"""The whole plan of a job, made once: the TF-free decisions of plan/records.py, plus the op placements, which are read
from the user's graph (placement.py), the collective backend (which needs to look at what is installed), and with
run_option="AUTO" the methods the cost model chooses (auto_plan.py).
Nothing is rewritten here."""
import dataclasses

from parallax import collectives
from parallax.rules import batch_draws, batch_statistics, example_counts, gradient_check, input_sharding, loss_law, loss_seeds, state_writes
from parallax.rules.catalog import RULES
from parallax.rules.rule import FindSite
from parallax.config import check_ssh_carries
from parallax.plan.fusion_groups import decide_fusion_groups
from parallax.plan.placement import decide_placements
from parallax.plan.sync_cut import decide_sync_cut
from parallax.plan.records import Aggregation
from parallax.plan.variable_decisions import decide_variables
from parallax.plan import auto_plan


def plan_job(graph, analysis, spec, config):
    # Asynchronous workers do not compute one device's steps anyway: nothing is split or combined.
    statistics = batch_statistics.statistics_of_the_batch(graph, analysis) \
        if spec.num_workers > 1 and config.sync else batch_statistics.BatchStatistics()
    draws = batch_draws.draws_following_the_batch(graph) if spec.num_workers > 1 else batch_draws.BatchDraws()
    plan, decided = _planned(graph, analysis, spec, config, statistics, draws)
    # The check simulates split draws and the statistics combined of the data, not the other rules' rewrites or
    # what they list.
    if spec.num_workers > 1 and plan.sync and not (statistics.uncombinable or statistics.fused or statistics.paired or
                                                   draws.unsplittable):
        listed = _checked(graph, analysis, plan, statistics, draws)
        if listed and statistics.whole_sums:
            # A function of a sum that is not proportional to it (`positives + 1`, a guard) differs at the
            # workers' mean: the step reads every such value whole instead, if its gradients then are one
            # device's.
            whole = statistics.read_whole()
            whole_plan, whole_decided = _planned(graph, analysis, spec, config, whole, draws)
            if not _checked(graph, analysis, whole_plan, whole, draws):
                plan, decided, statistics, listed = whole_plan, whole_decided, whole, []
        plan = dataclasses.replace(plan, uncombinable_statistics=tuple(listed))
    if spec.num_workers > 1 and plan.sync:
        # a statistic read whole (gathered_statistics.py's) is one device's for every reader, as combined ones are
        one_devices = [name for name, _, _ in statistics.combined] + [
            name for name, law in statistics.laws if law == batch_statistics.WHOLE]
        rows, listed, covered = state_writes.checked(
            graph, analysis, one_devices, draws.split,
            [name for name, _ in statistics.fused], {entry.what for entry in plan.uncombinable_statistics})
        plan = dataclasses.replace(plan, batch_statistics=plan.batch_statistics + tuple(rows),
                                   uncombinable_statistics=tuple(
                                       entry for entry in plan.uncombinable_statistics
                                       if entry.what not in covered) + tuple(listed))
    # Horovod's tensor fusion pays off only for a step's many gradient allreduces; a gather in the step waits for
    # its negotiation cycle (benchmarks/README.md, "Which collective backend")
    dense_only = plan.aggregations == {Aggregation.ALLREDUCE} and not plan.uses_servers and not plan.gathers_in_step
    backend = collectives.resolve(_backend_choice(decided), dense_only) if plan.uses_collectives else "none"
    plan = dataclasses.replace(plan, backend=backend)
    if collectives.rows_held_on_servers(backend) and plan.uses_local_aggregation:
        plan = _rows_held_on_servers(plan)
    if spec.num_workers > 1 and plan.sync:
        plan = dataclasses.replace(plan, counted_inputs=example_counts.counted_inputs(graph))
    if plan.uses_collectives:
        plan = dataclasses.replace(plan, fusion_groups=decide_fusion_groups(graph, plan))
    plan = dataclasses.replace(plan, placements=decide_placements(graph, plan))
    return dataclasses.replace(plan, sync_broadcasts=decide_sync_cut(graph, plan))


def _rows_held_on_servers(plan):
    """`plan` with each host's rows held on its parameter server (task h on host h): a host whose server holds
    nothing is not started a server for this, and its workers send their rows straight to the variables' servers;
    with no such host, no local aggregation."""
    holders = tuple(holder if plan.worker_hosts[holder] in plan.server_tasks else w
                    for w, holder in enumerate(plan.holders))
    if all(holder == w for w, holder in enumerate(holders)):
        return dataclasses.replace(plan, variables=tuple(dataclasses.replace(v, local_aggregation=False)
                                                         for v in plan.variables))
    return dataclasses.replace(plan, holders=holders, rows_held_on_servers=True)


def _planned(graph, analysis, spec, config, statistics, draws):
    """(the plan, the config with its averaging decided) for the statistics combined as `statistics` says: the
    losses' laws (read with the statistics as the rewrite makes them), AUTO's methods, each rule's findings."""
    partitions, losses = None, loss_law.LossReading({}, {}, "", "")
    left_to_the_loss = config.average_dense is None and config.average_sparse is None
    if config.average_dense is None or config.average_sparse is None:
        if spec.num_workers > 1:
            losses = loss_law.laws_and_means(graph, statistics.laws, draws.split)
        average = loss_law.averages(losses.laws)
        config = dataclasses.replace(config, **{name: average for name in ("average_dense", "average_sparse")
                                                if getattr(config, name) is None})
    if config.run_option == "AUTO" and spec.num_workers > 1:
        auto = auto_plan.choose(graph, analysis, spec, config, statistics)
        config, partitions = auto.config, auto.partitions
    plan = dataclasses.replace(decide_variables(analysis, spec, config), partitions=partitions,
                               averaging=losses.sentence)
    if spec.num_workers == 1:
        return plan, config
    site = FindSite(graph, analysis, plan, left_to_the_loss, losses, statistics, draws)
    for rule in RULES:  # each reads the plan before any rule's findings: their order does not matter
        plan = dataclasses.replace(plan, **rule.found(site))
    plan = dataclasses.replace(plan, notes=losses.notes() + input_sharding.notes(graph, spec.num_workers,
                                                                                 plan.update_ops))
    if plan.loss_seeds:  # a mean's gradients start at 1/N: every variable's are summed
        plan = dataclasses.replace(plan, averaging=loss_seeds.sentence(plan.loss_seeds, plan.mean_term_edges),
                                   variables=tuple(dataclasses.replace(v, average=False) for v in plan.variables))
    return plan, config


def _checked(graph, analysis, plan, statistics, draws):
    """The last check's list (gradient_check.py) for `plan`, its statistics read as `statistics` combines them."""
    averaged = {v.name: v.average for v in plan.variables}
    return gradient_check.mismatched(graph, analysis, lambda name: averaged.get(name, True), draws.split,
                                     plan.loss_seeds, plan.mean_term_edges, statistics)


def _backend_choice(config):
    """Config.collective_backend, as the transport allows: over ssh only TF's gRPC can be tunnelled, so "auto"
    means "tf"."""
    if config.transport != "ssh":
        return config.collective_backend
    check_ssh_carries(config.run_option, config.collective_backend)
    return collectives.TF
