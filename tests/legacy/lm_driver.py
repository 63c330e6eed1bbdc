"""A small LSTM language model written for the original Parallax's API, in the style of its lm1b example: tf.app
flags, a config built field by field (communication, checkpoint and profile configs), embedding and softmax shards
from parallax.legacy.partition, a GPU pin, clipped gradients, Adagrad and an EMA, the LSTM state fed back as per-replica
lists, parallax.log, and an end by SIGTERM to itself. tests/legacy/test_parallel_run.py runs it."""
import os

import numpy as np
import tensorflow as tf

import parallax

tf1 = tf.compat.v1
flags = tf1.app.flags
flags.DEFINE_string("resource_info_file", None, "the resource info file")
flags.DEFINE_string("run_option", "HYBRID", "PS, MPI or HYBRID")
flags.DEFINE_boolean("sync", True, "synchronous training")
flags.DEFINE_string("ckpt_dir", None, "checkpoint directory")
flags.DEFINE_integer("save_ckpt_steps", None, "steps between checkpoints")
flags.DEFINE_boolean("replicate_variables", True, "")
flags.DEFINE_boolean("local_aggregation", True, "")
flags.DEFINE_string("profile_dir", None, "")
flags.DEFINE_integer("max_steps", 12, "steps per worker")
flags.DEFINE_integer("batch_size", 4, "batch size per replica")
flags.DEFINE_integer("num_steps", 5, "unrolled steps")
flags.DEFINE_integer("vocab_size_limit", 300, "vocabulary")
flags.DEFINE_integer("emb_size", 16, "embedding size")
flags.DEFINE_integer("state_size", 24, "LSTM state")
flags.DEFINE_integer("num_variable_shards", 2, "shards of the embedding and softmax")
flags.DEFINE_string("restore_from", None, "restore this checkpoint dir into the unmodified graph and evaluate")
FLAGS = flags.FLAGS


class Model:
    pass


def build_model():
    m = Model()
    m.global_step = tf1.train.get_or_create_global_step()
    shards = parallax.partition.get_partitions(FLAGS.num_variable_shards)
    rows = (FLAGS.vocab_size_limit + shards - 1) // shards
    with tf.device("/gpu:0"):
        m.x = tf1.placeholder(tf.int32, [FLAGS.batch_size, FLAGS.num_steps])
        m.y = tf1.placeholder(tf.int32, [FLAGS.batch_size, FLAGS.num_steps])
        m.initial_state_c = tf1.placeholder(tf.float32, [FLAGS.batch_size, FLAGS.state_size], name="initial_c")
        m.initial_state_h = tf1.placeholder(tf.float32, [FLAGS.batch_size, FLAGS.emb_size], name="initial_h")
        emb = [tf1.get_variable("emb_%d" % i, [rows, FLAGS.emb_size]) for i in range(shards)]
        softmax_w = [tf1.get_variable("softmax_w_%d" % i, [rows, FLAGS.emb_size]) for i in range(shards)]
        softmax_b = tf1.get_variable("softmax_b", [FLAGS.vocab_size_limit], initializer=tf1.zeros_initializer())
        W = tf1.get_variable("W", [2 * FLAGS.emb_size, 4 * FLAGS.state_size])
        B = tf1.get_variable("B", [4 * FLAGS.state_size], initializer=tf1.zeros_initializer())
        W_P = tf1.get_variable("W_P", [FLAGS.state_size, FLAGS.emb_size])
        inputs = tf.unstack(tf.nn.embedding_lookup(emb, m.x), axis=1)
        c, h, outputs = m.initial_state_c, m.initial_state_h, []
        for t in range(FLAGS.num_steps):
            i, j, f, o = tf.split(tf1.nn.xw_plus_b(tf.concat([inputs[t], h], 1), W, B), 4, axis=1)
            c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
            h = tf.matmul(tf.sigmoid(o) * tf.tanh(c), W_P)
            outputs.append(h)
        logits = tf.matmul(tf.reshape(tf.stack(outputs, 1), [-1, FLAGS.emb_size]),
                           tf.concat(softmax_w, 0)[:FLAGS.vocab_size_limit], transpose_b=True) + softmax_b
        m.loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(m.y, [-1]), logits=logits))
        lstm_vars = [W, B, W_P]
        all_vars = emb + lstm_vars + softmax_w + [softmax_b]
        grads = tf.gradients(m.loss * FLAGS.num_steps, all_vars)
        emb_grads = [tf.IndexedSlices(g.values * FLAGS.batch_size, g.indices, g.dense_shape) for g in grads[:shards]]
        lstm_grads, _ = tf.clip_by_global_norm(grads[shards:shards + 3], 10.0)
        train_op = tf1.train.AdagradOptimizer(0.2, initial_accumulator_value=1.0).apply_gradients(
            list(zip(emb_grads + lstm_grads + grads[shards + 3:], all_vars)), global_step=m.global_step)
        with tf.control_dependencies([train_op]):
            m.train_op = tf1.train.ExponentialMovingAverage(decay=0.999).apply(lstm_vars)
    m.final_state_c, m.final_state_h = c, h
    return m


def build_config():
    ckpt_config = parallax.CheckPointConfig(ckpt_dir=FLAGS.ckpt_dir, save_ckpt_steps=FLAGS.save_ckpt_steps)
    ps_config = parallax.PSConfig(replicate_variables=FLAGS.replicate_variables, protocol="grpc",
                                  local_aggregation=FLAGS.local_aggregation, boundary_among_servers=True,
                                  boundary_between_workers_and_servers=True)
    mpi_config = parallax.MPIConfig(use_allgatherv=False, mpirun_options="")
    profile_config = parallax.ProfileConfig(profile_dir=FLAGS.profile_dir, profile_steps=None, profile_range=None)
    parallax_config = parallax.Config()
    parallax_config.run_option = FLAGS.run_option
    parallax_config.average_sparse = False
    parallax_config.communication_config = parallax.CommunicationConfig(ps_config, mpi_config)
    parallax_config.ckpt_config = ckpt_config
    parallax_config.profile_config = profile_config
    parallax_config.redirect_path = None
    parallax_config.export_graph_path = None
    parallax_config.search_partitions = False
    return parallax_config


def batches(num_workers, worker_id, replicas):
    """Worker `worker_id`'s slice of a fixed stream of batches."""
    rng = np.random.RandomState(5)
    size = FLAGS.batch_size * replicas
    while True:
        words = rng.randint(0, FLAGS.vocab_size_limit, (num_workers * size, FLAGS.num_steps + 1))
        mine = words[worker_id * size:(worker_id + 1) * size]
        yield mine[:, :-1], mine[:, 1:]


def main(_):
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(3)
        with tf1.variable_scope("model"):
            model = build_model()
    if FLAGS.restore_from:
        with graph.as_default(), tf1.Session(config=tf1.ConfigProto(allow_soft_placement=True)) as sess:
            tf1.train.Saver().restore(sess, tf1.train.latest_checkpoint(FLAGS.restore_from))
            x, y = next(batches(1, 0, 1))
            zeros_c = np.zeros([FLAGS.batch_size, FLAGS.state_size], np.float32)
            zeros_h = np.zeros([FLAGS.batch_size, FLAGS.emb_size], np.float32)
            loss = sess.run(model.loss, {model.x: x, model.y: y, model.initial_state_c: zeros_c,
                                         model.initial_state_h: zeros_h})
            print("restored global_step=%d loss=%.4f" % (sess.run(model.global_step), loss))
        return
    sess, num_workers, worker_id, num_replicas_per_worker = parallax.parallel_run(
        graph, FLAGS.resource_info_file, sync=FLAGS.sync, parallax_config=build_config())
    state_c = [np.zeros([FLAGS.batch_size, FLAGS.state_size], np.float32) for _ in range(num_replicas_per_worker)]
    state_h = [np.zeros([FLAGS.batch_size, FLAGS.emb_size], np.float32) for _ in range(num_replicas_per_worker)]
    prev_global_step = sess.run(model.global_step)[0]
    data = batches(num_workers, worker_id, num_replicas_per_worker)
    fetches = {"global_step": model.global_step, "loss": model.loss, "train_op": model.train_op,
               "final_state_c": model.final_state_c, "final_state_h": model.final_state_h}
    for local_step in range(FLAGS.max_steps):
        x, y = next(data)
        feeds = {model.x: np.split(x, num_replicas_per_worker), model.y: np.split(y, num_replicas_per_worker),
                 model.initial_state_c: state_c, model.initial_state_h: state_h}
        fetched = sess.run(fetches, feeds)
        state_c, state_h = fetched["final_state_c"], fetched["final_state_h"]
        if local_step % 4 == 0:
            parallax.log.info("Iteration %d (from %d), train loss = %.4f" % (
                fetched["global_step"][0], prev_global_step, fetched["loss"][0]))
    os.system("kill %d" % os.getpid())


if __name__ == "__main__":
    tf1.app.run()
