"""The 1-worker runner: bitwise identical to a plain Session, and a Runner API that speaks the user's names."""
import numpy as np
import pytest
import tensorflow as tf

import parallax
from tests.models_for_tests import embedding_mlp

tf1 = tf.compat.v1
LOCAL = "localhost: 0"


def _plain_session_values(g, h, steps):
    with g.as_default():
        init = tf1.global_variables_initializer()
        variables = tf1.global_variables()
    losses = []
    with tf1.Session(graph=g) as sess:
        sess.run(init)
        for ids, y in embedding_mlp.batches(steps, 8):
            losses.append(sess.run([h["loss"], h["train_op"]], {h["ids"]: ids, h["labels"]: y})[0])
        return losses, dict(zip([v.op.name for v in variables], sess.run(variables)))


def test_one_worker_runner_is_bitwise_identical_to_plain_session():
    steps = 100
    g, h = embedding_mlp.build("Adam", ema=True)
    expected_losses, expected_vars = _plain_session_values(g, h, steps)
    with g.as_default():
        variables = tf1.global_variables()
    losses = []
    with parallax.get_runner(g, LOCAL) as runner:
        for ids, y in embedding_mlp.batches(steps, 8):
            losses.append(runner.run([h["loss"], h["train_op"]], {h["ids"]: ids, h["labels"]: y})[0])
        got = dict(zip([v.op.name for v in variables], runner.run(variables)))
    assert len(losses) == steps and losses[-1] < losses[0]
    assert losses == expected_losses  # bitwise: exact float equality, every step
    assert sorted(got) == sorted(expected_vars)
    assert any("ExponentialMovingAverage" in n for n in got) and any("/Adam" in n for n in got)
    for name, value in expected_vars.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    assert got["global_step"] == steps


def test_runner_identity_and_name_fetches():
    g, h = embedding_mlp.build("GradientDescent")
    with parallax.get_runner(g, parallax.ResourceSpec.load(LOCAL)) as runner:
        assert (runner.worker_id, runner.num_workers, runner.is_chief) == (0, 1, True)
        feed = {"ids:0": np.array([1, 2], np.int32), "labels": np.array([0.5, 0.25], np.float32)}
        by_name = runner.run({"loss": "loss:0", "nested": ["global_step"]}, feed)
        assert set(by_name) == {"loss", "nested"} and by_name["nested"] == [None]  # an op fetch returns None
        by_obj = runner.run(h["loss"], {h["ids"]: feed["ids:0"], h["labels"]: feed["labels"]})
        assert by_obj == pytest.approx(by_name["loss"])
        step_var = [v for v in g.get_collection("variables") if v.op.name == "global_step"][0]
        runner.run(h["train_op"], {h["ids"]: feed["ids:0"], h["labels"]: feed["labels"]})
        assert runner.run(step_var) == 1


def test_the_runner_is_a_session_to_eval_and_run():
    """As in a TF1 tutorial: inside `with get_runner(...) as sess:` the runner is the default session, so
    `train_op.run(feed_dict=...)` and `loss.eval(...)` run through it; `sess.graph` is the user's graph (eval checks
    it), `rewritten_graph` the one that runs; after the block, neither default is left behind."""
    g, h = embedding_mlp.build("GradientDescent")
    feed = {h["ids"]: np.array([1, 2], np.int32), h["labels"]: np.array([0.5, 0.25], np.float32)}
    step_var = [v for v in g.get_collection("variables") if v.op.name == "global_step"][0]
    with parallax.get_runner(g, LOCAL) as sess:
        assert sess.graph is g and sess.rewritten_graph is not g and sess.rewritten_graph.finalized
        assert tf1.get_default_session() is sess and tf1.get_default_graph() is g
        before = h["loss"].eval(feed_dict=feed)
        h["train_op"].run(feed_dict=feed)
        assert step_var.eval() == 1 and h["loss"].eval(feed_dict=feed, session=sess) < before
        assert sess.run(h["loss"], feed) == h["loss"].eval(feed_dict=feed)
    assert tf1.get_default_session() is None
    with pytest.raises(parallax.ParallaxError, match="closed"):
        h["loss"].eval(feed_dict=feed, session=sess)


def test_make_callable_runs_its_fetches_with_the_values_of_its_feeds():
    g, h = embedding_mlp.build("GradientDescent")
    ids, labels = np.array([1, 2], np.int32), np.array([0.5, 0.25], np.float32)
    with parallax.get_runner(g, LOCAL) as runner:
        loss_of = runner.make_callable(h["loss"], [h["ids"], h["labels"]])
        assert loss_of(ids, labels) == runner.run(h["loss"], {h["ids"]: ids, h["labels"]: labels})
        with pytest.raises(parallax.ParallaxError, match="takes 2 feed value"):
            loss_of(ids)
        with pytest.raises(parallax.ParallaxError, match="accept_options=True"):
            loss_of(ids, labels, options=tf1.RunOptions())
        traced = runner.make_callable(h["loss"], [h["ids"], h["labels"]], accept_options=True)
        metadata = tf1.RunMetadata()
        traced(ids, labels, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=metadata)
        assert metadata.step_stats.dev_stats


def test_profiled_steps_are_written_as_chrome_traces(tmp_path):
    import json
    g, h = embedding_mlp.build("Adam")
    config = parallax.Config(log_dir=str(tmp_path), profile_steps=(2,))
    feed = {h["ids"]: np.array([1, 2], np.int32), h["labels"]: np.array([0.5, 0.25], np.float32)}
    with parallax.get_runner(g, LOCAL, config) as runner:
        runner.run(h["loss"], feed)  # not a training step: not counted, not traced
        for _ in range(3):
            runner.run(h["train_op"], feed)
    assert sorted(p.name for p in tmp_path.glob("trace.*")) == ["trace.worker0.step2.json"]
    events = json.loads((tmp_path / "trace.worker0.step2.json").read_text())["traceEvents"]
    names = {e.get("args", {}).get("op") for e in events}
    assert any(n and "Adam" in n for n in names), sorted(filter(None, names))[:20]


def test_missing_fetch_is_a_clear_error():
    g, h = embedding_mlp.build("GradientDescent")
    with parallax.get_runner(g, LOCAL) as runner:
        with pytest.raises(parallax.FetchNotFoundError, match="'no_such_tensor:0' is not in the graph"):
            runner.run("no_such_tensor:0")
        other = tf.Graph()
        with other.as_default():
            stray = tf.constant(1.0, name="stray")
        with pytest.raises(parallax.FetchNotFoundError, match="another graph"):
            runner.run(stray)
        with g.as_default():
            late = tf.identity(h["loss"], name="added_late")
        with pytest.raises(parallax.FetchNotFoundError, match="after get_runner"):
            runner.run(late)


def test_graph_without_training_op_is_rejected():
    g = tf.Graph()
    with g.as_default():
        w = tf1.get_variable("w", [3], use_resource=True)
        tf.reduce_sum(w * 2.0, name="loss")
    with pytest.raises(parallax.NoTrainOpError, match="minimize"):
        parallax.get_runner(g, LOCAL)


def test_non_graph_is_rejected():
    with pytest.raises(parallax.GraphAnalysisError, match="needs the tf.Graph"):
        parallax.get_runner("graph.pbtxt", LOCAL)


def test_graph_without_variables_is_rejected():
    g = tf.Graph()
    with g.as_default():
        tf.constant(1.0)
    with pytest.raises(parallax.GraphAnalysisError, match="no trainable variables"):
        parallax.get_runner(g, LOCAL)


def test_closed_runner_refuses_to_run():
    g, h = embedding_mlp.build("GradientDescent")
    runner = parallax.get_runner(g, LOCAL)
    runner.close()
    runner.close()  # idempotent
    with pytest.raises(parallax.ParallaxError, match="closed"):
        runner.run(h["loss"])


def test_checkpoint_restores_into_the_unmodified_single_device_graph(tmp_path):
    config = parallax.Config(checkpoint_dir=str(tmp_path), save_checkpoint_steps=3)
    g, h = embedding_mlp.build("Adam")
    with g.as_default():
        trainables = tf1.trainable_variables()
    with parallax.get_runner(g, LOCAL, config) as runner:
        for ids, y in embedding_mlp.batches(4, 8):
            runner.run(h["train_op"], {h["ids"]: ids, h["labels"]: y})
            runner.run(h["loss"], {h["ids"]: ids, h["labels"]: y})  # not a training step
        trained = runner.run(trainables)
    saved = tf1.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths
    assert [p.rsplit("-", 1)[1] for p in saved] == ["3", "4"]  # every 3 training steps, and at close
    fresh, _ = embedding_mlp.build("Adam")
    with fresh.as_default(), tf1.Session() as sess:
        tf1.train.Saver().restore(sess, tf1.train.latest_checkpoint(str(tmp_path)))
        restored = sess.run(tf1.trainable_variables())
    for a, b in zip(trained, restored):
        np.testing.assert_array_equal(a, b)
    # A new runner on the same directory resumes from the checkpoint instead of re-initializing.
    with parallax.get_runner(embedding_mlp.build("Adam")[0], LOCAL, config) as resumed:
        assert resumed.run("global_step:0") == 4


def test_unsupported_mode_is_refused_before_anything_starts():
    g, _ = embedding_mlp.build("GradientDescent")  # has a sparse variable: HYBRID puts it on a server
    with pytest.raises(parallax.UnsupportedError, match=r"HYBRID runs synchronously"):
        parallax.get_runner(g, "localhost slots=4", parallax.Config(sync=False))


def test_a_remote_host_is_launched_and_checked_first():
    from parallax.launcher.preflight import PreflightError
    g, _ = embedding_mlp.build("GradientDescent")
    with pytest.raises(PreflightError, match=r"example.invalid: cannot reach the host over ssh"):
        parallax.get_runner(g, "example.invalid: 0")


def test_shard_yields_every_element_for_one_worker():
    with tf.Graph().as_default() as g:
        ds = parallax.shard(tf.data.Dataset.range(10)).batch(10)
        element = tf.compat.v1.data.make_one_shot_iterator(ds).get_next()
        with tf.compat.v1.Session(graph=g) as sess:
            assert sess.run(element).tolist() == list(range(10))
    with pytest.raises(parallax.ParallaxError, match="tf.data.Dataset"):
        parallax.shard([1, 2, 3])


def test_a_second_runner_of_one_graph_while_the_first_is_open_is_refused():
    # With several workers any second get_runner in a worker is refused (test_launcher.py); one slot refuses the
    # same mistake, so that a script that runs on one slot does not fail first when launched.
    g, _ = embedding_mlp.build("GradientDescent")
    first = parallax.get_runner(g, LOCAL)
    with pytest.raises(parallax.UnsupportedError, match="called a second time in this process.*Call get_runner once"):
        parallax.get_runner(g, LOCAL)
    other, _ = embedding_mlp.build("GradientDescent")
    parallax.get_runner(other, LOCAL).close()  # another graph: another one-process job, as in a notebook
    first.close()
    parallax.get_runner(g, LOCAL).close()  # closed: the graph may start again


def test_a_keras_models_variables_fetch_as_their_values_as_in_a_plain_session():
    """Issue 57, item 6: `runner.run(variable)` (what tf.keras.backend.get_value runs) was reported to give a
    resource handle for a Keras functional model's weights. Every weight, the optimizer's slots and the step fetch
    as values equal to a plain Session's, by object and by the handle's name (not reproduced as a handle here)."""
    g = tf.Graph()
    with g.as_default():
        x, y = tf1.placeholder(tf.float32, [None, 3]), tf1.placeholder(tf.float32, [None, 1])
        inputs = tf.keras.Input((3,))
        model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, kernel_initializer="ones")(
            tf.keras.layers.Dense(4, kernel_initializer="ones")(inputs)))
        train = tf1.train.AdamOptimizer(0.1).minimize(tf.reduce_mean(tf.square(model(x) - y)),
                                                      tf1.train.get_or_create_global_step())
        variables = tf1.global_variables()
    feed = {x: np.ones((2, 3), np.float32), y: np.zeros((2, 1), np.float32)}
    with tf1.Session(graph=g) as sess:
        sess.run(tf1.variables_initializer(variables))
        sess.run(train, feed)
        expected = sess.run(variables)
    with parallax.get_runner(g, LOCAL) as runner:
        runner.run(train, feed)
        got = runner.run(variables)
        by_name = runner.run([v.name for v in model.weights])
    assert len(variables) > len(model.weights) >= 4
    for v, value, want in zip(variables, got, expected):
        assert isinstance(value, (np.ndarray, np.generic)) and value.dtype == want.dtype, (v.name, value)
        np.testing.assert_array_equal(value, want, err_msg=v.name)
    expected_by_name = {v.name: want for v, want in zip(variables, expected)}
    for v, value in zip(model.weights, by_name):
        np.testing.assert_array_equal(value, expected_by_name[v.name], err_msg=v.name)


def test_a_fetch_of_none_is_refused_naming_the_new_keras_optimizers_minimize():
    """In a v1 graph the new Keras optimizers' minimize returns None and applies nothing; a run that fetches it
    (`runner.run([loss, train_op])`) would train nothing, silently: refused, as TF's Session refuses a None fetch."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="loss")
        train_op = tf.keras.optimizers.Adam(0.1).minimize(lambda: tf.reduce_mean(tf.square(tf.matmul(x, w))), [w])
    assert train_op is None  # what this test is about: if Keras returns an op one day, the refusal never shows
    with parallax.get_runner(g, LOCAL) as runner:
        with pytest.raises(parallax.errors.NoTrainOpError) as refused:
            runner.run([loss, train_op], {x: np.ones((2, 3), np.float32)})
    message = str(refused.value)
    assert message.startswith("runner.run was given None to fetch, at [1]"), message
    assert "the new Keras optimizers' minimize and apply_gradients return in a v1 graph" in message
    assert "tf.compat.v1.train.AdamOptimizer" in message
