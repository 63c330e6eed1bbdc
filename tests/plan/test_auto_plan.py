"""run_option="AUTO" (auto_plan.py): the plan takes the cost model's choice per variable, from the calibration of
the job's hosts; without one it fails with what to run. Exactness of AUTO's plans: equivalence/test_auto.py."""
import json

import pytest
import tensorflow as tf

import parallax
from parallax.plan import auto_plan, calibration, cost_model, plan_json
from parallax.errors import ConfigError
from parallax.plan.records import Method
from parallax.plan.planning import plan_job

tf1 = tf.compat.v1
TWO_BY_TWO = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")
# Allgathering a large, busy embedding's rows costs much per byte; a small embedding's push and pull cost the
# hosts more CPU than its allgather, on a machine whose one core every process shares (as in test_cost_model).
MIXING = cost_model.Machine(1e9, 1e-4, cores=1, cpu_per_byte={"allgather/tf": 5e-8}, cpu_per_message={"ps": 1e-2})


def two_embeddings():
    g = tf.Graph()
    with g.as_default():
        big_ids = tf1.placeholder(tf.int32, [2000], "big_ids")
        small_ids = tf1.placeholder(tf.int32, [64], "small_ids")
        big = tf1.get_variable("big", [20000, 64], use_resource=True)
        small = tf1.get_variable("small", [8, 4], use_resource=True)
        h = tf.concat([tf.nn.embedding_lookup(big, big_ids)[:64], tf.nn.embedding_lookup(small, small_ids)], 1)
        loss = tf.reduce_mean(tf1.layers.dense(h, 1, name="dense"))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


def _calibration(tmp_path, machine=MIXING, alpha=None, in_job=None):
    return calibration.Calibration(machine, 0.05, 0.05, alpha or {}, 2, in_job=in_job).save(str(tmp_path))


def _measured(mode, wall):
    return [{"worker": w, "workers": 4, "mode": mode, "backend": "tf", "host": w // 2, "workers_per_host": [2, 2],
             "wall": wall, "cpu": 0.05, "machine_cpu": None, "steps": 20} for w in range(4)]


def _plan(g, config, spec=TWO_BY_TWO):
    return plan_job(g, parallax.analyze(g), spec, config)


def test_auto_takes_the_cost_models_mixed_choice(tmp_path):
    g = two_embeddings()
    plan = _plan(g, parallax.Config(run_option="AUTO", calibration=_calibration(tmp_path)))
    methods = {v.name: v.method for v in plan.variables}
    assert methods == {"big": Method.PS, "small": Method.AG, "dense/kernel": Method.AR, "dense/bias": Method.AR}
    assert plan.run_option == "AUTO" and plan_json.loads(plan_json.dumps(plan)) == plan
    for fixed in ("PS", "MPI", "HYBRID"):  # a plan none of them makes
        assert {v.name: v.method for v in _plan(g, parallax.Config(run_option=fixed)).variables} != methods


def test_auto_keeps_the_users_own_methods_and_asynchronous_training_on_servers(tmp_path):
    g = two_embeddings()
    path = _calibration(tmp_path)
    plan = _plan(g, parallax.Config(run_option="AUTO", calibration=path, methods={"big": "AG"}))
    assert plan.variable("big").method == Method.AG
    plan = _plan(g, parallax.Config(run_option="AUTO", calibration=path, sync=False))
    assert plan.methods == {Method.PS}


def test_auto_reads_the_calibration_in_the_log_dir_and_is_local_with_one_worker(tmp_path):
    g = two_embeddings()
    _calibration(tmp_path)
    plan = _plan(g, parallax.Config(run_option="AUTO", log_dir=str(tmp_path)))
    assert plan.variable("small").method == Method.AG
    one = _plan(g, parallax.Config(run_option="AUTO"), parallax.ResourceSpec.load("localhost:1"))
    assert one.methods == {Method.LOCAL}


def test_auto_without_a_calibration_says_what_to_run(tmp_path):
    g = two_embeddings()
    with pytest.raises(ConfigError, match="parallax-calibrate"):
        _plan(g, parallax.Config(run_option="AUTO"))
    with pytest.raises(ConfigError, match="no calibration at"):
        _plan(g, parallax.Config(run_option="AUTO", calibration=str(tmp_path / "missing.json")))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"machine": {}}))
    with pytest.raises(ConfigError, match="is not a calibration"):
        _plan(g, parallax.Config(run_option="AUTO", calibration=str(bad)))


def test_explain_prints_each_modes_predicted_step_time_and_why_each_variable_got_its_method(tmp_path, capsys):
    g = two_embeddings()
    result = parallax.explain(g, TWO_BY_TWO, parallax.Config(run_option="AUTO", calibration=_calibration(tmp_path)))
    assert set(result.predicted) == {"PS", "MPI", "HYBRID", "AUTO"}
    assert result.predicted["AUTO"] < min(result.predicted[m] for m in ("PS", "MPI", "HYBRID"))
    out = capsys.readouterr().out
    assert "predicted step time" in out and "AUTO " in out
    assert "  small: AllGather; PS would take +" in out and "  big: PS; AG would take +" in out


def test_auto_runs_a_fixed_modes_plan_when_its_real_job_beat_the_models_best(tmp_path, capsys):
    g = two_embeddings()
    config = parallax.Config(run_option="AUTO", calibration=_calibration(tmp_path))
    predicted = parallax.explain(g, TWO_BY_TWO, config, print_table=False).predicted
    # The jobs ran as fast as predicted, but PS's ran faster than the mixed plan is predicted to: scaled by the
    # model's error (1, the median), that prediction is no match for it.
    measured = {m: predicted["AUTO"] * 0.8 if m == "PS" else predicted[m] for m in ("PS", "MPI", "HYBRID")}
    path = _calibration(tmp_path / "measured", in_job={m: _measured(m, t) for m, t in measured.items()})
    config = parallax.Config(run_option="AUTO", calibration=path)
    assert _plan(g, config).methods == {Method.PS}
    result = parallax.explain(g, TWO_BY_TWO, config)
    assert result.measured == pytest.approx(measured) and result.basis == "measured PS"
    assert "AUTO runs the plan of the fixed mode PS: its expected step" in capsys.readouterr().out
    # The user's own methods, and asynchronous training, are never overridden by a measured mode's plan
    own = _plan(g, parallax.Config(run_option="AUTO", calibration=path, methods={"small": "AG"}))
    assert own.variable("small").method == Method.AG and own.methods != {Method.PS}
    assert _plan(g, parallax.Config(run_option="AUTO", calibration=path, sync=False)).methods == {Method.PS}
    # When the jobs ran as predicted, the model's mixed plan stays
    path = _calibration(tmp_path / "as-predicted", in_job={m: _measured(m, predicted[m]) for m in measured})
    assert _plan(g, parallax.Config(run_option="AUTO", calibration=path)).variable("small").method == Method.AG
    # A short job a little faster than the model's best, but within the measurement's spread of its own
    # prediction, which is well behind: the mean of the two estimates counts, and the mixed plan stays
    near = dict(predicted, HYBRID=predicted["AUTO"] * 0.95)
    assert near["HYBRID"] / predicted["HYBRID"] > 1 - auto_plan.MEASUREMENT_SPREAD
    path = _calibration(tmp_path / "near", in_job={m: _measured(m, near[m]) for m in measured})
    assert _plan(g, parallax.Config(run_option="AUTO", calibration=path)).variable("small").method == Method.AG


def partitioned(parts_env=None):
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int32, [512], "ids")
        with tf1.variable_scope("model", partitioner=parallax.get_partitioner(1)):
            emb = tf1.get_variable("emb", [100000, 64], use_resource=True)
        loss = tf.reduce_mean(tf.nn.embedding_lookup(emb, ids))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


@pytest.mark.parametrize("machine,parts", [
    # serving rows costs CPU: with one shard, one host's server serves every worker (a hot server); two balance
    (cost_model.Machine(1e12, 0, 1, {"ps": 1e-8}, {}), 2),
    # messages cost much and bytes nothing: one shard, one message per worker
    (cost_model.Machine(1e12, 0, 64, {}, {"ps": 1e-2}), 1)])
def test_auto_chooses_how_many_shards_get_partitioner_makes(tmp_path, machine, parts):
    g = partitioned()
    config = parallax.Config(run_option="AUTO", calibration=_calibration(tmp_path, machine),
                             methods={"model/emb": "PS"})
    plan = _plan(g, config)
    assert plan.partitions == parts and plan_json.loads(plan_json.dumps(plan)).partitions == parts
    assert _plan(g, config.replace(run_option="PS")).partitions is None  # only AUTO chooses


def test_get_partitioner_makes_the_number_auto_chose(monkeypatch):
    monkeypatch.setenv("PARALLAX_PARTITIONS", "3")
    g = partitioned()
    assert len(parallax.analyze(g).variable("model/emb").parts) == 3


def test_when_the_models_best_plan_is_a_fixed_modes_its_measured_step_counts(tmp_path):
    g = two_embeddings()
    servers = cost_model.Machine(1e9, 1e-4, cores=64, cpu_per_byte={"allreduce/tf": 1e-6, "allgather/tf": 1e-6},
                                 cpu_per_message={"allreduce/tf": 1e-2, "allgather/tf": 1e-2})
    config = parallax.Config(run_option="AUTO", calibration=_calibration(tmp_path, servers))
    assert _plan(g, config).methods == {Method.PS}  # the model's best: PS's own plan
    predicted = parallax.explain(g, TWO_BY_TWO, config, print_table=False).predicted
    assert predicted["PS"] < predicted["HYBRID"] < 2 * predicted["PS"]
    # PS's real job ran at twice its prediction, the others as predicted: HYBRID's measured step is the fastest
    measured = {"PS": 2 * predicted["PS"], "MPI": predicted["MPI"], "HYBRID": predicted["HYBRID"]}
    path = _calibration(tmp_path / "measured", servers, in_job={m: _measured(m, t) for m, t in measured.items()})
    plan = _plan(g, parallax.Config(run_option="AUTO", calibration=path))
    assert plan.variable("dense/kernel").method == Method.AR and plan.variable("big").method == Method.PS


def test_autos_workload_charges_what_a_workers_step_reads_on_servers(tmp_path):
    g = two_embeddings()
    calibrated = calibration.load(_calibration(tmp_path))
    workload = auto_plan.workload_of(g, parallax.analyze(g), calibrated, TWO_BY_TWO,
                                     parallax.Config(run_option="AUTO"))
    loads = {v.name: v for v in workload.variables}
    assert loads["dense/kernel"].reads == (1, 68 * 1 * 4)
    # the mean of a linear layer: no gradient needs the bias's value, so a training step never reads it
    assert loads["dense/bias"].reads == (0, 0)
    assert loads["big"].reads is None  # sparse: the rows a step gathers (a), not reads of the whole variable
    alone = auto_plan.workload_of(g, parallax.analyze(g), calibrated)  # no spec: one copy per variable
    assert all(v.reads is None for v in alone.variables)


def test_autos_read_count_falls_back_to_one_copy_when_no_all_servers_plan_exists(tmp_path, monkeypatch):
    from parallax.errors import UnsupportedError

    def cannot(*_):
        raise UnsupportedError("no plan")
    monkeypatch.setattr(auto_plan, "decide_variables", cannot)
    g = two_embeddings()
    workload = auto_plan.workload_of(g, parallax.analyze(g), calibration.load(_calibration(tmp_path)), TWO_BY_TWO,
                                     parallax.Config(run_option="AUTO"))
    assert all(v.reads is None for v in workload.variables)


def test_explain_shows_each_methods_cpu_scaled_to_the_calibrations_real_jobs(tmp_path, capsys):
    g = two_embeddings()
    # Every job's machine spent 0.5 CPU s per step; the workers' compute (4 x 0.05) leaves each mode's
    # communication 0.3 s, far above what MIXING's probes charge the servers
    reports = {m: [dict(r, machine_cpu=0.5) for r in _measured(m, 0.2)] for m in ("PS", "MPI", "HYBRID")}
    config = parallax.Config(run_option="AUTO", calibration=_calibration(tmp_path, in_job=reports))
    result = parallax.explain(g, TWO_BY_TWO, config)
    assert set(result.cpu_scales) == {"ps", "collectives/tf"} and result.cpu_scales["ps"] > 1
    out = capsys.readouterr().out
    assert "communication CPU, the probes' costs scaled to the real jobs: collectives/tf x" in out
    assert result.to_data()["cpu_scales"] == result.cpu_scales
    # The jobs' step times fix how the two bounds combine, and explain says so
    assert "the step from its critical path and CPU bound, as the real jobs overlapped them: " in out
    assert result.to_data()["overlap_exponent"] == result.overlap_exponent
    unscaled = parallax.explain(g, TWO_BY_TWO, config.replace(calibration=_calibration(tmp_path / "no-jobs")),
                                print_table=False)
    assert unscaled.cpu_scales == {} and result.predicted["PS"] > unscaled.predicted["PS"]
    assert unscaled.overlap_exponent is None
