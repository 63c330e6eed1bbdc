"""A parameter server process loads TF's server module without TF's Python API (parallax/runtime/tf_server.py)."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PROBE = """
import os, sys
from parallax.runtime import tf_server
from parallax.process import ports
server_lib = tf_server._tf_module("python.training.server_lib")
print("api loaded:", "tensorflow.python.ops.nn_ops" in sys.modules, "package left:", "tensorflow" in sys.modules)
port = ports.reserve_local_ports(1)[0]
claim = os.path.join(ports.REGISTRY, str(port))
print("claimed:", os.path.exists(claim))
server = tf_server.start_tf_server({"ps": [f"127.0.0.1:{port}"]}, "ps", 0)
print("claim left:", os.path.exists(claim))
print("target:", server.target)
import tensorflow as tf  # the real package, after the stand-in has gone
tf.compat.v1.disable_eager_execution()
with tf.compat.v1.Session(server.target) as sess:
    print("ran:", sess.run(tf.constant(6) * 7))
"""


def test_a_server_starts_without_tf_python_api_and_tf_imports_whole_afterwards(tmp_path):
    """... and drops its port's claim once it has bound it (launcher/ports.py)."""
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(tmp_path))
    probe = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert "api loaded: False package left: False" in probe.stdout, probe.stdout
    assert "claimed: True" in probe.stdout and "claim left: False" in probe.stdout, probe.stdout
    assert "target: grpc://" in probe.stdout
    assert "ran: 42" in probe.stdout, probe.stdout
