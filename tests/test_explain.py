"""parallax.explain: the plan as data and as a table, Table 3 traffic predictions, and the CLI."""
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import parallax
from tests.models_for_tests import embedding_mlp

tf1 = tf.compat.v1
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TWO_HOSTS = "127.0.0.1: 0,1\n127.0.0.2: 0,1"


def _static_batch_graph():
    """An embedding [40, 6] looked up 8 times per step (static shape): a = 8 / 40."""
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int32, [8], name="ids")
        emb = tf1.get_variable("emb", [40, 6], use_resource=True)
        w = tf1.get_variable("w", [6, 10], use_resource=True)
        loss = tf.reduce_sum(tf.matmul(tf.nn.embedding_lookup(emb, ids), w))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


@pytest.mark.parametrize("run_option, emb_method, emb_bytes, w_bytes", [
    ("HYBRID", "PS", 2 * 0.2 * 960, 2 * 3 * 240 / 4),
    ("PS", "PS", 2 * 0.2 * 960, 2 * 240),
    ("MPI", "AG", 3 * 0.2 * 960, 2 * 3 * 240 / 4),
])
def test_table3_predictions(run_option, emb_method, emb_bytes, w_bytes, capsys):
    e = parallax.explain(_static_batch_graph(), TWO_HOSTS, parallax.Config(run_option=run_option))
    traffic = {t.variable: t for t in e.traffic}
    assert traffic["emb"].method == emb_method and traffic["emb"].sparsity == pytest.approx(0.2)
    assert traffic["emb"].bytes_per_step == round(emb_bytes)
    assert traffic["w"].bytes_per_step == round(w_bytes) and traffic["w"].sparsity is None
    assert e.bytes_per_step == round(emb_bytes) + round(w_bytes)
    printed = capsys.readouterr().out
    assert f"run_option={run_option}, 4 workers on 2 host(s)" in printed and "bytes/step" in printed


def test_unknown_sparsity_is_marked_not_guessed():
    g, _ = embedding_mlp.build("Adam")  # ids placeholder of shape [None]
    e = parallax.explain(g, TWO_HOSTS, print_table=False)
    emb = next(t for t in e.traffic if t.variable == "model/embedding")
    assert emb.sparsity is None and emb.bytes_per_step is None and e.bytes_per_step is None
    assert "unknown" in str(e)


def _dataset_graph():
    """An embedding [30, 4] looked up 6 times per batch of a tf.data pipeline, whose batch dimension is dynamic."""
    g = tf.Graph()
    with g.as_default():
        ids = tf1.data.make_one_shot_iterator(
            tf.data.Dataset.range(30).map(lambda i: i % 30).repeat().batch(6)).get_next()
        emb = tf1.get_variable("emb", [30, 4], use_resource=True)
        loss = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


@pytest.mark.parametrize("run_option, expected", [("PS", 2 * 0.2 * 480), ("MPI", 3 * 0.2 * 480)])
def test_sparsity_measured_from_the_input_pipeline(run_option, expected):
    g = _dataset_graph()
    assert parallax.explain(g, TWO_HOSTS, parallax.Config(run_option=run_option), print_table=False) \
        .traffic[0].sparsity is None  # dynamic batch: not static
    before = len(g.get_operations())
    e = parallax.explain(g, TWO_HOSTS, parallax.Config(run_option=run_option), print_table=False,
                         measure_sparsity=3)
    assert e.traffic[0].sparsity == pytest.approx(0.2) and e.bytes_per_step == round(expected)
    assert len(g.get_operations()) == before  # measured on a copy


def test_measure_sparsity_rejects_a_bad_count():
    with pytest.raises(parallax.ConfigError, match="measure_sparsity"):
        parallax.explain(_dataset_graph(), TWO_HOSTS, print_table=False, measure_sparsity=-1)


def test_explained_plan_is_the_plan_executed():
    g, _ = embedding_mlp.build("Adam")
    e = parallax.explain(g, "localhost: 0", print_table=False)
    with parallax.get_runner(g, "localhost: 0") as runner:
        assert runner.plan == e.plan
    e = parallax.explain(g, TWO_HOSTS, parallax.Config(run_option="PS"), print_table=False)
    placed = dict(e.placements["place_variables_on_servers"])
    for v in e.plan.variables:
        assert placed[v.name] == f"/job:ps/task:{v.ps_tasks[0]}"


def test_cli_explains_a_training_script_without_starting_anything():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "parallax.explain", "models/demo/train.py",
                          "--resource-spec", "localhost:2", "--steps", "5"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "parallax plan: run_option=HYBRID, 2 workers on 1 host(s)" in out.stdout
    assert "embedding" in out.stdout and "launching" not in out.stdout + out.stderr
    assert "step 5/5" not in out.stdout  # no training ran


def test_cli_json_prints_the_plan_as_the_job_loads_it():
    import json
    from parallax.plan import plan_json
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "parallax.explain", "--json", "models/demo/train.py",
                          "--resource-spec", "localhost:2", "--steps", "5"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout[out.stdout.index("{"):])
    plan = plan_json.from_data(data["plan"])
    assert plan.num_workers == 2 and {str(v.method) for v in plan.variables} == {"AR", "PS"}
    assert data["premise"].startswith("exact:") and len(data["traffic"]) == len(plan.variables)
    assert "parallax plan:" not in out.stdout  # the table is not printed with --json


def test_cli_reports_a_script_that_never_calls_get_runner(tmp_path):
    script = tmp_path / "nothing.py"
    script.write_text("print('hello')\n")
    out = subprocess.run([sys.executable, "-m", "parallax.explain", str(script)], cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "without calling parallax.get_runner" in out.stderr


def test_the_premise_of_exactness_is_printed_with_the_plan(capsys):
    g, _ = embedding_mlp.build("Adam")
    explanation = parallax.explain(g, "localhost:2")
    out = capsys.readouterr().out
    assert "when the loss is a mean over the batch" in out and explanation.premise in out
    summed = parallax.explain(g, "localhost:2", parallax.Config(average_dense=False, average_sparse=False),
                              print_table=False)
    assert "when the loss is a sum over the batch" in summed.premise and "batch norm" not in summed.premise


def test_the_premise_states_that_batch_norm_normalizes_with_the_whole_batchs_statistics():
    from tests.test_ps_rewrite import _batch_norm_graph
    explanation = parallax.explain(_batch_norm_graph(), "localhost:2", print_table=False)
    assert "statistic(s) of the batch that the step computes with (a token count a loss divides by, batch norm's " \
        "moments" in explanation.premise
    assert "of the same size in every worker" in explanation.premise and "not exact" not in explanation.premise


def test_parallax_explain_is_callable_after_its_module_was_imported():
    import parallax.explain  # noqa: F401  (sets the package's attribute to the module)
    e = parallax.explain(_static_batch_graph(), TWO_HOSTS, print_table=False)
    assert {t.variable for t in e.traffic} == {"emb", "w"}


def test_cli_options_are_explains_wherever_they_stand_and_the_rest_goes_to_the_script(tmp_path):
    """`python -m parallax.explain train.py --resource-spec F` as documented: --resource-spec is explain's, though
    it follows the script, and a script without options of its own is not handed it; `--` passes the rest."""
    script, seen = tmp_path / "train.py", tmp_path / "argv.json"
    script.write_text(
        "import json, sys\nimport tensorflow as tf\nimport parallax\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "tf1 = tf.compat.v1\ntf1.disable_eager_execution()\ng = tf.Graph()\nwith g.as_default():\n"
        "    w = tf1.get_variable('w', [3], use_resource=True)\n"
        "    tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * w))\n"
        "parallax.get_runner(g, 'localhost:1', parallax.Config())\n")
    out = subprocess.run([sys.executable, "-m", "parallax.explain", str(script), "--resource-spec", "localhost:2",
                          "--lr", "0.1", "--", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "2 workers on 1 host(s)" in out.stdout and "parallax plan:" in out.stdout  # explain's table, not JSON
    import json
    assert json.loads(seen.read_text()) == ["--lr", "0.1", "--json"]


def test_explain_prints_the_counted_inputs_and_the_rules_entries_from_the_plan():
    from tests.test_ps_rewrite import _batch_norm_graph
    explanation = parallax.explain(_batch_norm_graph(), "localhost:2", print_table=False)
    text = str(explanation)
    counted = explanation.plan.counted_inputs
    assert counted and all(c.op in text and c.tensor in text for c in counted)
    assert "example counts (each synchronized step reports them" in text
    assert "statistics of the batch: " in text  # the plan's combined statistics, as Plan.batch_summaries lists them
    alone = parallax.explain(_batch_norm_graph(), "localhost:1", print_table=False)
    assert not alone.plan.counted_inputs and "example counts" not in str(alone)  # one worker: nothing to compare
