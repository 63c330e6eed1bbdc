"""`import parallax` is cheap (no TensorFlow), and capture works whichever is imported first."""
import subprocess
import sys
import textwrap

ROOT = __file__.rsplit("/tests/", 1)[0]


def _run(code):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                         env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_importing_parallax_and_its_launcher_does_not_import_tensorflow():
    assert _run("""
        import sys, parallax, parallax.process.resource_spec, parallax.process.role, parallax.plan.records
        import parallax.launcher.cli, parallax.tools.calibrate, parallax.plan.cost_model, parallax.plan.calibration
        import parallax.plan.plan_search
        print('tensorflow' in sys.modules)""") == "False"


def test_capture_installs_when_tensorflow_is_imported_after_parallax():
    assert _run("""
        import parallax
        import tensorflow as tf
        tf.compat.v1.disable_eager_execution()
        w = tf.compat.v1.get_variable("w", [2])
        tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * w))
        print(parallax.analyze(tf.compat.v1.get_default_graph()).captured)""") == "True"


def test_graph_built_before_import_parallax_is_analyzed_from_its_update_ops():
    assert _run("""
        import tensorflow as tf
        tf.compat.v1.disable_eager_execution()
        emb = tf.compat.v1.get_variable("emb", [10, 3])
        loss = tf.reduce_sum(tf.gather(emb, [1, 2]) ** 2)
        tf.compat.v1.train.AdamOptimizer().minimize(loss)
        import parallax
        a = parallax.analyze(tf.compat.v1.get_default_graph())
        v = a.variable("emb")
        print(a.captured, v.kind, v.gradients[0].is_sparse, len(v.slots), len(v.update_ops) > 0)""") == \
        "False sparse True 2 True"


def test_a_graph_built_before_import_parallax_has_its_losses_and_batch_statistics_found():
    """No loss was recorded: the losses are the tensors whose gradient takes tf.gradients' default seed."""
    assert _run("""
        import tensorflow as tf
        tf1 = tf.compat.v1
        tf1.disable_eager_execution()
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        h = tf1.layers.dense(x, 4)
        mean, variance = tf.nn.moments(h, axes=[0])
        loss = tf.reduce_mean(tf.square((h - mean) * tf.math.rsqrt(variance + 1e-3)), name="loss")
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
        import parallax
        from parallax.rules import batch_statistics
        from parallax.capture import gradients as capture
        g = tf1.get_default_graph()
        found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
        print(capture.loss_records(g), sorted(n for n, _, _ in found.combined if not n.startswith("gradients/")))""") \
        == "['loss:0'] ['moments/mean:0', 'moments/variance:0']"
