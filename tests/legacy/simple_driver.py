"""A linear regression written for the original Parallax's API (parallel_run, list feeds and fetches, tf.app flags,
the session never closed), as its users wrote them. tests/legacy/test_parallel_run.py runs it."""
import os

import numpy as np
import tensorflow as tf

import parallax

tf1 = tf.compat.v1
flags = tf1.app.flags
flags.DEFINE_string("resource_info", None, "the resource info file")
flags.DEFINE_string("run_option", "HYBRID", "PS, MPI or HYBRID")
flags.DEFINE_boolean("sync", True, "synchronous training")
flags.DEFINE_string("ckpt_dir", None, "checkpoint directory")
flags.DEFINE_integer("max_steps", 50, "steps per worker")
flags.DEFINE_float("learning_rate", 0.01, "learning rate")
flags.DEFINE_boolean("single_device", False, "train with a plain Session instead (the reference)")
flags.DEFINE_string("restore_from", None, "restore this checkpoint dir into the unmodified graph and print w, b")
flags.DEFINE_boolean("ref_variables", False, "TF1 reference variables instead of resource variables")
flags.DEFINE_string("export_graph_path", None, "write the transformed graph there")
flags.DEFINE_float("save_ckpt_secs", None, "seconds between checkpoints")
flags.DEFINE_boolean("pin_gpu", False, "pin the model to /gpu:0, as scripts written on a GPU machine do")
FLAGS = flags.FLAGS

rng = np.random.RandomState(7)
train_x = rng.uniform(-1, 1, (18, 2)).astype(np.float32)
train_y = (train_x @ np.array([[0.8], [-1.3]], np.float32) + 2.0).astype(np.float32)
num_samples = train_x.shape[0]


def build():
    if FLAGS.ref_variables:
        tf1.disable_resource_variables()
    single_gpu_graph = tf.Graph()
    with single_gpu_graph.as_default(), tf.device("/gpu:0" if FLAGS.pin_gpu else None):
        tf1.set_random_seed(1234)
        global_step = tf1.train.get_or_create_global_step()
        x = tf1.placeholder(tf.float32, shape=(2,))
        y = tf1.placeholder(tf.float32, shape=(1,))
        w = tf1.get_variable(name="w", shape=(2, 1))
        b = tf1.get_variable(name="b", shape=(1,))
        pred = tf.nn.bias_add(tf.matmul(tf.expand_dims(x, axis=0), w), b)
        loss = tf.reduce_sum(tf.pow(pred - tf.expand_dims(y, axis=0), 2)) / 2
        train_op = tf1.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(loss, global_step=global_step)
    return single_gpu_graph, dict(x=x, y=y, w=w, b=b, loss=loss, train_op=train_op, global_step=global_step)


def run(sess, t, num_replicas_per_worker, per_replica=True):
    cursor = 0
    for i in range(FLAGS.max_steps):
        xs = [train_x[(cursor + j) % num_samples] for j in range(num_replicas_per_worker)]
        ys = [train_y[(cursor + j) % num_samples] for j in range(num_replicas_per_worker)]
        cursor += num_replicas_per_worker
        feed = {t["x"]: xs, t["y"]: ys} if per_replica else {t["x"]: xs[0], t["y"]: ys[0]}
        results = sess.run({"global_step": t["global_step"], "loss": t["loss"], "train_op": t["train_op"]}, feed)
        step, loss = (results["global_step"][0], results["loss"][0]) if per_replica else \
            (results["global_step"], results["loss"])
        if i % 10 == 0:
            print("global step: %d, loss: %f" % (step, loss), flush=True)


def main(_):
    graph, t = build()
    if FLAGS.restore_from:
        with graph.as_default(), tf1.Session() as sess:
            tf1.train.Saver().restore(sess, tf1.train.latest_checkpoint(FLAGS.restore_from))
            print("restored w=%s b=%s global_step=%d" % (sess.run(t["w"]).ravel().tolist(),
                                                        sess.run(t["b"]).tolist(), sess.run(t["global_step"])))
        return
    if FLAGS.single_device:
        with graph.as_default(), tf1.Session(config=tf1.ConfigProto(allow_soft_placement=True)) as sess:
            sess.run(tf1.global_variables_initializer())
            run(sess, t, 1, per_replica=False)
            tf1.train.Saver().save(sess, os.path.join(FLAGS.ckpt_dir, "model.ckpt"), global_step=t["global_step"])
        return
    config = parallax.Config()
    config.run_option = FLAGS.run_option
    config.ckpt_config = parallax.CheckPointConfig(ckpt_dir=FLAGS.ckpt_dir, save_ckpt_secs=FLAGS.save_ckpt_secs)
    config.export_graph_path = FLAGS.export_graph_path
    sess, num_workers, worker_id, num_replicas_per_worker = parallax.parallel_run(
        graph, FLAGS.resource_info, sync=FLAGS.sync, parallax_config=config)
    parallax.log.info("worker %d of %d, %d replica(s)" % (worker_id, num_workers, num_replicas_per_worker))
    run(sess, t, num_replicas_per_worker)


if __name__ == "__main__":
    tf1.app.run()
