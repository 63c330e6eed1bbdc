"""A parameter server process: `python -m parallax.runtime.ps_server`, started by the launcher.

It serves job `ps`, task $PARALLAX_PS_TASK of the cluster in $PARALLAX_CLUSTER until it is told to stop (SIGTERM
from the launcher when the workers are done). TensorFlow's gRPC server runs any graph sent to it without
authentication; the launcher's bind shim keeps it on its cluster address only (see docs/security.md).
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
    from parallax.process.role import ENV_CLUSTER, ENV_PS_TASK, register_process, report_serving
    register_process()  # the launcher can stop this process by id
    try:
        cluster = json.loads(os.environ[ENV_CLUSTER])
        task = int(os.environ[ENV_PS_TASK])
    except (KeyError, ValueError) as e:
        sys.exit(f"parallax.runtime.ps_server: {e}: start servers through parallax's launcher")
    # No Python SIGTERM handler: it could not run while the main thread blocks in join(), and the default
    # action (terminate) is exactly what the launcher asks for.
    from parallax.runtime.tf_server import start_tf_server
    from parallax.errors import ParallaxError
    try:
        server = start_tf_server(cluster, "ps", task)
    except ParallaxError as e:
        sys.exit(f"parallax.runtime.ps_server: {type(e).__name__}: {e}")
    print(f"serving ps task {task} at {cluster['ps'][task]}", flush=True)
    report_serving()
    server.join()


if __name__ == "__main__":
    main()
