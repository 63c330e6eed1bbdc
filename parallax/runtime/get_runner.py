"""`parallax.get_runner`: the stages that start a job, in order, for whatever role this process has.

    capture (while the graph was built) -> analyze -> plan -> launch or join -> rewrite -> checks -> Runner

- launcher (the script, run by hand): makes the plan; with several slots it launches the job, whose workers
  re-run the script and load this plan, and exits with the job's status; with one local slot it is the job.
- planner (parallax-launch runs the script once so): makes the plan, writes it, and stops the script.
- explain (`python -m parallax.explain`): prints what the plan would do, and stops the script.
- worker: loads the job's plan, checks that its own graph is the one planned, joins the cluster, rewrites, runs.
"""
import dataclasses
import json
import os
import sys
import weakref

import tensorflow as tf

from parallax import collectives
from parallax.rules import batch_draws, batch_statistics
from parallax.runtime import cluster, worker_checks
from parallax.plan import plan_json
from parallax.analysis.graph_analysis import analyze
from parallax.config import Config, translate
from parallax.errors import (ConfigError, GraphAnalysisError, LaunchError, NoTrainOpError, ParallaxError,
                             UnsupportedError, report_if_uncaught)
from parallax.process.protocol import (ENV_PARTITIONS, ENV_PLAN, ENV_PLAN_OUT, ENV_RESOURCE_SPEC,
                                        ENV_CHECK, ENV_RUN_OPTION, ENV_SETTINGS_OUT, ENV_TRANSPORT, ProcessContext, Role,
                                        this_process)
from parallax.process.resource_spec import ResourceSpec
from parallax.process.script_roles import ScriptStopped
from parallax.plan.plan_json import check_matches
from parallax.plan.planning import plan_job
from parallax.rewrite import passes_for, rewrite
from parallax.runtime.runner import Runner
from parallax.runtime.keras_runner import KerasRunner, is_keras_model
from parallax.runtime.step_runner import StepRunner
from parallax.launcher.job import launch_job
from parallax.process.role import register_process
from parallax.plan.auto_plan import partitioned_variables
from parallax.launcher.mpirun import rerun_command

tf1 = tf.compat.v1


class Repartitioned(BaseException):
    """A planner that is a thread (thread_job.py) chose `partitions` shards for the variables get_partitioner split,
    which its graph does not have: its job builds the graph again with that number (a process runs itself again)."""

    def __init__(self, partitions):
        super().__init__(partitions)
        self.partitions = partitions


def get_runner(graph, resource_spec, config=None):
    """Analyze, plan and rewrite `graph` for the hosts in `resource_spec`; return a Runner for this process.

    `graph` is a v1-style tf.Graph with variables, a loss and `opt.minimize(...)`, or a TF2 training step: a
    `tf.function` (or Python function) of a batch that takes gradients with `tf.GradientTape` and applies them.
    For a step the runner is a StepRunner, called like the step (runtime/step_runner.py). `resource_spec` is a
    path, spec text, a `-H` string (`localhost:1`) or a ResourceSpec.
    """
    try:
        return _runner_for(graph, resource_spec, config)
    except ParallaxError as error:
        report_refusal(error)
        raise


def report_refusal(error):
    """Print `error` as one line if it ends the process uncaught (errors.report_if_uncaught). A launched worker's
    own hook reports it to the launcher (launcher/role.py); a thread job's, its job."""
    context = this_process()
    if not context.in_thread and not (context.launched and context.role.role == "worker"):
        report_if_uncaught(error)


def _runner_for(graph, resource_spec, config):
    config = Config() if config is None else config
    if not isinstance(config, Config):
        raise ConfigError(f"config must be a parallax.Config, not {type(config).__name__}")
    if is_keras_model(graph):
        context = this_process()
        only_launches = context.role.role == "launcher" and \
            _launches_others(_settings(resource_spec, config, context.environ)[0])
        return KerasRunner(graph, lambda lifted: get_runner(lifted, resource_spec, config), context.role,
                           report_refusal, only_launches=only_launches)
    if not isinstance(graph, tf.Graph) and callable(graph):
        return StepRunner(graph, lambda lifted: get_runner(lifted, resource_spec, config), report_refusal)
    if not isinstance(graph, tf.Graph):
        raise GraphAnalysisError(f"get_runner() needs the tf.Graph that holds the model, or a training step (a "
                                 f"function of a batch), not {type(graph).__name__}")
    if tf.executing_eagerly() and not graph.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES):
        raise UnsupportedError(
            "get_runner was given a graph without variables while eager execution is on: TF2 code creates its "
            "variables eagerly, in no graph. Pass the training step itself (a tf.function that takes a batch, "
            "takes gradients with tf.GradientTape and applies them): runner = parallax.get_runner(train_step, "
            "...), then loss = runner(x, y)")
    context = this_process()
    config = legacy_fields_applied(config, context.role)
    config.check_combinations()
    spec, config = _settings(resource_spec, config, context.environ)
    if context.at_get_runner is not None:  # a one-process role: explain, calibrate (script_roles.py)
        context.at_get_runner(graph, spec, config)
        raise ScriptStopped()
    analysis = analyze(graph)
    if not analysis.trained_variables:
        raise NoTrainOpError("the graph has trainable variables but no optimizer update for any of them; "
                             "add a training op, e.g. tf.compat.v1.train.AdamOptimizer().minimize(loss)")
    plan = _job_plan(graph, analysis, spec, config, context.role, context.environ)
    start = _Start(graph, analysis, plan, config, spec, context)
    by_role = _BY_ROLE.get(context.role.role)
    if by_role is None:
        raise LaunchError(f"get_runner was called in a process of role {context.role.role!r}, which runs no "
                          f"training script; start it with parallax-launch or run the script itself")
    return by_role(start)


@dataclasses.dataclass(frozen=True)
class _Start:
    """What get_runner knows once the plan is made, for the step its process's role takes next."""
    graph: tf.Graph
    analysis: object
    plan: object
    config: Config
    spec: ResourceSpec
    context: ProcessContext


def _as_planner(start):
    """parallax-launch ran the script once so: write the plan (and the settings the launcher obeys) and stop."""
    _announce(start)
    environ, config = start.context.environ, start.config
    with open(environ[ENV_PLAN_OUT], "w") as f:
        f.write(plan_json.dumps(start.plan))
    if environ.get(ENV_SETTINGS_OUT):  # the script's Config fields that the launcher itself obeys
        with open(environ[ENV_SETTINGS_OUT], "w") as f:
            json.dump({"stall_warning_s": config.stall_warning(), "stall_timeout_s": config.stall_timeout_s,
                       "transport": config.transport}, f)
    sys.exit(0)  # the script's work is done: its plan is written


def _as_launcher(start):
    """The script, run by hand: with several slots, launch the job (every worker re-runs the script) and exit with
    its status; with one local slot, be the whole job."""
    _announce(start)
    if _launches_others(start.spec):
        sys.exit(launch_job(start.spec, start.config, start.plan))
    return _joined(start, Role("worker", 0, 1))


def _launches_others(spec):
    """Whether a script run by hand launches the job's processes (and exits with their status) rather than being
    the whole job itself."""
    return spec.num_workers > 1 or not spec.hosts[0].is_local


def _as_worker(start):
    role = start.context.role
    passes_for(start.plan)
    if role.num_workers != start.spec.num_workers:
        raise UnsupportedError(f"this worker was launched for {role.num_workers} workers but {start.spec.source} "
                               f"has {start.spec.num_workers} slots; pass the same spec in every worker")
    return _joined(start, role)


_BY_ROLE = {"planner": _as_planner, "launcher": _as_launcher, "worker": _as_worker}


def _announce(start):
    """The process that plans: the graph again if AUTO repartitioned, the plan's warnings, and a plan this version
    can run (before any process starts)."""
    _rebuild_if_repartitioned(start.graph, start.analysis, start.plan, start.context)
    for note in plan_warnings(start.plan):
        print(f"parallax: warning: {note}", file=sys.stderr, flush=True)
    passes_for(start.plan)


def _joined(start, role):
    _refuse_a_second_join(start.graph, role, start.context)
    register_process(start.context)  # a launched worker: the launcher can stop it by id, and hears of its failure
    runner = _join(start.graph, start.analysis, start.plan, start.config, role, start.context)
    start.context.runners.append(weakref.ref(runner))
    return runner


def _refuse_a_second_join(graph, role, context):
    """A launched worker is one worker of one job, for its whole life: its servers, its collectives and the
    launcher's count of its steps belong to its first Runner. A second get_runner there is refused, before it
    could hang or miscount. A process the user started alone may make several one-process jobs (a notebook, a
    test), but not two at once of one graph: that is the same mistake, and it would fail once launched."""
    earlier = [r for r in (ref() for ref in context.runners) if r is not None]
    if context.launched and context.runners:
        where = f"worker {role.worker_id} of {role.num_workers}"
    elif any(r.graph is graph and not r.closed for r in earlier):
        where = "this process, for a graph whose first Runner is still open"
    else:
        return
    raise UnsupportedError(f"parallax.get_runner was called a second time in {where}: each process of a job joins "
                           f"it once. Call get_runner once, after the whole graph is built, and run every fetch "
                           f"(training, evaluation, summaries) through that Runner")


def plan_warnings(plan):
    """What the launcher warns of at start: where the plan cannot make the job one device's, or may not."""
    notes = [note for note in [batch_draws.unsplittable_note(plan)] if note]
    notes += [batch_statistics.uncombinable_note(plan)] if plan.uncombinable_statistics else []
    notes += [note.text for note in plan.notes]
    return notes


def legacy_fields_applied(config, role, translated=None):
    """`config` with the original Parallax's fields (config.legacy) turned into Config fields; the warnings for
    fields it cannot honour are printed once, by the process that plans (launched workers stay quiet)."""
    if not config.legacy:
        return config
    translated = translated or translate(config)
    if role.role != "worker" and translated.warnings:
        print("\n".join(translated.warnings), file=sys.stderr, flush=True)
    return translated.config


def _settings(resource_spec, config, environ):
    """A launched process uses the launcher's spec (`parallax-launch -H ...` need not match the script's argument)
    and its --run-option, when given."""
    text = environ.get(ENV_RESOURCE_SPEC)
    spec = ResourceSpec.parse(text, source="the launcher's resource spec") if text else \
        ResourceSpec.load(resource_spec)
    run_option = environ.get(ENV_RUN_OPTION)
    if run_option and run_option != config.run_option:
        config = dataclasses.replace(config, run_option=run_option)
    check = environ.get(ENV_CHECK)
    if check:  # parallax-launch --check-steps K [--check-warns]
        steps, _, warns = check.partition(":")
        config = dataclasses.replace(config, check_steps=int(steps), check_fails=warns != "warn")
    transport = environ.get(ENV_TRANSPORT)
    if transport and transport != config.transport:
        config = dataclasses.replace(config, transport=transport)
    return spec, config


def _rebuild_if_repartitioned(graph, analysis, plan, context):
    """AUTO chose another number of shards for the variables get_partitioner split than the graph has: run this
    program again with that number (the script builds its graph before get_runner can say), as the workers will.
    A thread cannot run its program again: Repartitioned tells its job to, with the number."""
    if plan.partitions is None or context.environ.get(ENV_PARTITIONS):
        return
    split = [v for v in analysis.trained_variables if v.name in partitioned_variables(graph, analysis)[0]]
    if all(len(v.parts) == plan.partitions for v in split):
        return
    if context.in_thread:
        raise Repartitioned(plan.partitions)
    print(f"parallax: run_option=AUTO splits {', '.join(v.name for v in split)} into {plan.partitions} shards (the "
          f"graph has {len(split[0].parts)}); running the script again with them", file=sys.stderr, flush=True)
    os.environ[ENV_PARTITIONS] = str(plan.partitions)
    command = rerun_command()
    os.execv(command[0], command)


def _job_plan(graph, analysis, spec, config, role, environ):
    """A launched worker's plan is the job's, made once by the launcher; anyone else makes it here. (A worker of a
    command the launcher could not run once, launcher/planner.py, makes its own too: the graph fingerprint check
    then tells whether all workers agree.)"""
    path = environ.get(ENV_PLAN) if role.role == "worker" else None
    if not path:
        return plan_job(graph, analysis, spec, config)
    try:
        with open(path) as f:
            plan = plan_json.loads(f.read())
    except OSError as e:
        raise LaunchError(f"worker {role.worker_id} cannot read the job's plan: {e}") from None
    check_matches(plan, analysis, who=f"worker {role.worker_id}")
    return plan


def _join(graph, analysis, plan, config, role, context):
    if plan.uses_collectives and plan.backend == collectives.HOROVOD:
        worker_checks.init_horovod(role)
    server, session_config = None, config.session_config
    if plan.uses_worker_servers:
        holders = set(plan.holders) if plan.uses_local_aggregation and not plan.rows_held_on_servers else ()
        tf_collectives = plan.uses_collectives and plan.backend == collectives.TF
        server, filters = cluster.start_worker_server(role, context, holders, tf_collectives)
        session_config = _merged(session_config, filters)
    rewritten = rewrite(graph, plan, config, worker_id=role.worker_id, collective_group=context.collective_group)
    if role.num_workers > 1:
        worker_checks.check_same_graph(rewritten, server, role, context.environ)
    if config.log_dir and role.is_chief:
        os.makedirs(config.log_dir, exist_ok=True)
        with open(os.path.join(config.log_dir, "plan.txt"), "w") as f:
            f.write(f"{analysis}\n\n{plan}\n")
        with open(os.path.join(config.log_dir, "plan.json"), "w") as f:
            f.write(plan_json.dumps(plan))
    return Runner(graph, rewritten, analysis, plan, config, role, server=server, session_config=session_config,
                  context=context)


def _merged(user_config, extra):
    merged = tf1.ConfigProto()
    if user_config is not None:
        merged.CopyFrom(user_config)
    merged.MergeFrom(extra)
    return merged
