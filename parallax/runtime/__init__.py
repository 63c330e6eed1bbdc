"""Stage 6, the runtime: `get_runner` (get_runner.py) takes a process from the user's graph to a running worker: it
joins the cluster (cluster, tf_server, ps_server), checks the workers agree (worker_checks), and returns the Runner that
runs synchronized steps (runner, sync_step, step_fence, input_end) and checks them (step_check,
one_device_replay)."""
