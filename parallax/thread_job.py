"""A job whose workers are threads of this process, against TF servers in this process: the same plan, rewrite,
runner and synchronization as a launched job, without a process or a TensorFlow import per worker.

- `ServerPool`: parameter-server and worker tasks on loopback, started once and lent to job after job. TF cannot
  stop a gRPC server, so they are reused: between jobs every resource container in the cluster is reset (variables,
  queues, accumulators), and each job's collectives take a group key of their own (a collective instance fixes its
  shape when it first runs, and the servers remember it).
- `ThreadJob.run(script)`: what `get_runner`'s self-launch does, with threads for processes. The script runs once
  here in the planner role (get_runner plans, writes the plan and stops it), then once per worker in a thread
  acting as that worker (protocol.ProcessContext: the settings the launcher would give it, and the pool's server
  for its task). The workers' step lines go through the launcher's own step ledger.

A worker that fails, workers whose steps disagree, or a job that outlives its limit end the job at once, and leave
the pool broken: the other workers may stay blocked in a collective or a queue, and nothing in this process can end
them safely (TF's `Session.reset` clears containers while steps still wait on their queues, and crashed the
process so; TF's collectives stay aborted on servers that saw one fail). The process that owns the pool should
exit then, which ends those threads (tests/equivalence/case_host.py does, and its harness starts a new one).
Horovod needs one MPI process per worker: a plan with Horovod's collectives is refused. Imports TensorFlow.
"""
import dataclasses
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Optional

import tensorflow as tf

from parallax import collectives
from parallax.plan import plan_json
from parallax.collectives import tf_ops
from parallax.errors import LaunchError, UnsupportedError
from parallax.launcher import job as launched_job
from parallax.process import bind_shim, control_lines, ports, protocol
from parallax.process.resource_spec import ResourceSpec
from parallax.launcher.step_ledger import StepLedger
from parallax.runtime.get_runner import Repartitioned

tf1 = tf.compat.v1


class ThreadJobError(LaunchError):
    """A thread job failed: a worker raised, the workers' steps disagreed, or the job outlived its limit."""

    def __init__(self, message, worker_output=""):
        super().__init__(message)
        self.worker_output = worker_output


class ServerPool:
    """`num_servers` parameter-server tasks and `num_workers` worker tasks of one cluster, each a TF server of this
    process bound to `host` (a loopback address). Jobs borrow a prefix of each job's tasks."""

    def __init__(self, num_servers=2, num_workers=4, host="127.0.0.1"):
        if not bind_shim.preloaded_here():
            raise LaunchError(f"TF's servers listen on every address of the machine unless parallax's bind shim is "
                              f"preloaded: start this process with the environment that "
                              f"parallax.process.bind_shim.preloading_environment() gives ({bind_shim.ENV_BIND_HOSTS} "
                              f"and LD_PRELOAD), as tests/equivalence/case_hosts.py does")
        taken = ports.reserve_local_ports(num_servers + num_workers)
        self.cluster = {"ps": [f"{host}:{p}" for p in taken[:num_servers]],
                        "worker": [f"{host}:{p}" for p in taken[num_servers:]]}
        # The bind shim reads each server's address here when the server binds its port (TF binds the wildcard):
        # every task listens on `host`.
        os.environ[bind_shim.ENV_BIND_MAP] = ",".join(bind_shim.server_map(a) for tasks in self.cluster.values()
                                                      for a in tasks)
        self._servers = {}
        for job_name, addresses in self.cluster.items():
            for task in range(len(addresses)):
                self._servers[(job_name, task)] = tf.distribute.Server(
                    tf.train.ClusterSpec(self.cluster), job_name=job_name, task_index=task,
                    config=tf_ops.server_config(), start=True)
        for port in taken:
            ports.release(port)
        self._groups = 0
        self.broken = None  # why the pool can no longer run jobs

    @property
    def num_servers(self):
        return len(self.cluster["ps"])

    @property
    def num_workers(self):
        return len(self.cluster["worker"])

    def server(self, job_name, task):
        """The started server of `job_name` task `task` (protocol.ProcessContext.servers)."""
        return self._servers[(job_name, task)]

    def job_cluster(self, num_servers, num_workers):
        """The cluster a job with that many servers and workers sees: the first tasks of each job."""
        cluster = {"worker": self.cluster["worker"][:num_workers]}
        if num_servers:
            cluster["ps"] = self.cluster["ps"][:num_servers]
        return cluster

    def next_group(self):
        """A collective group key no earlier job on these servers used."""
        self._groups += 1
        return tf_ops.GROUP_KEY + self._groups

    def reset(self):
        """Clear every resource container on every task (variables, queues, accumulators) and close every session.
        Only between jobs: a step still waiting on a queue would then use the freed queue."""
        tf1.Session.reset(self._servers[("worker", 0)].target)


@dataclasses.dataclass
class _Worker:
    index: int
    context: protocol.ProcessContext
    lines: list  # its control lines (control_lines.py records)
    result: Any = None
    error: Optional[BaseException] = None
    trace: str = ""
    thread: Optional[threading.Thread] = None


class ThreadJob:
    """One job of `spec`'s workers as threads, on `pool`'s servers. `run_option`: parallax-launch's --run-option
    (None: the script's Config)."""

    def __init__(self, pool, spec, run_option=None, timeout_s=300.0):
        self.pool, self.run_option, self.timeout_s = pool, run_option, timeout_s
        self.spec = spec if isinstance(spec, ResourceSpec) else ResourceSpec.load(spec)
        self.plan = None

    def run(self, script):
        """Run `script` (a function of no arguments that builds the graph and calls get_runner) as the job; return
        each worker's return value, by rank. Raises ThreadJobError when a worker fails."""
        if self.pool.broken:
            raise ThreadJobError(f"this server pool cannot run another job: {self.pool.broken}")
        if self.spec.num_workers > self.pool.num_workers or self.spec.num_hosts > self.pool.num_servers:
            raise UnsupportedError(f"a thread job on {self.spec.num_workers} workers and {self.spec.num_hosts} "
                                   f"hosts needs a ServerPool of at least that many worker and server tasks")
        job_dir = tempfile.mkdtemp(prefix="parallax-thread-job-")
        try:
            partitions = self._plan(script, job_dir)
            workers = self._workers(job_dir, partitions)
            self._run_workers(script, workers)
            return [w.result for w in workers]
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)

    def _plan(self, script, job_dir):
        """Run the script in the planner role, as parallax-launch does; its plan goes to the job directory. Returns
        the shards AUTO chose for the variables get_partitioner split (None: the graph's own)."""
        out = os.path.join(job_dir, launched_job.PLAN_FILE)
        environ = {protocol.ENV_ROLE: "planner", protocol.ENV_PLAN_OUT: out,
                   protocol.ENV_RESOURCE_SPEC: str(self.spec)}
        if self.run_option:
            environ[protocol.ENV_RUN_OPTION] = self.run_option
        for _ in range(2):  # once more with AUTO's number of shards, if it chose another
            try:
                with protocol.ProcessContext(environ, in_thread=True).acting():
                    script()
            except Repartitioned as again:
                environ[protocol.ENV_PARTITIONS] = str(again.partitions)
                continue
            except SystemExit as stop:
                if stop.code not in (0, None):
                    raise ThreadJobError(f"planning: the script exited with {stop.code!r}") from None
            if not os.path.exists(out):
                raise ThreadJobError("planning: the script ended without calling parallax.get_runner")
            with open(out) as f:
                self.plan = plan_json.loads(f.read())
            if self.plan.uses_collectives and self.plan.backend == collectives.HOROVOD:
                raise UnsupportedError("Horovod's collectives need one MPI process per worker: run this job through "
                                       "the launcher, or with collective_backend='tf'")
            return None if protocol.ENV_PARTITIONS not in environ else int(environ[protocol.ENV_PARTITIONS])
        raise ThreadJobError("planning: AUTO chose another number of shards twice")

    def _workers(self, job_dir, partitions):
        num_servers, worker_servers = launched_job.servers_of(self.plan, self.run_option, self.spec.num_hosts,
                                                                  self.spec.num_workers)
        cluster = self.pool.job_cluster(num_servers, self.spec.num_workers) if num_servers or worker_servers \
            else None
        base = launched_job.worker_environment(self.spec, job_dir, cluster, True, self.run_option, partitions)
        group, steps = self.pool.next_group(), _Steps()
        workers = []
        for rank in range(self.spec.num_workers):
            lines = []

            def control(message, rank=rank, lines=lines):
                lines.append(message)
                steps.heard(rank, message)
            context = protocol.ProcessContext({**base, protocol.ENV_WORKER_ID: str(rank)}, control, self.pool,
                                              group, in_thread=True)
            workers.append(_Worker(rank, context, lines))
        self._steps = steps
        return workers

    def _run_workers(self, script, workers):
        for w in workers:
            w.thread = threading.Thread(target=self._work, args=(script, w), name=f"parallax-worker-{w.index}",
                                        daemon=True)
            w.thread.start()
        deadline = time.monotonic() + self.timeout_s
        why = None
        while why is None:
            alive = [w for w in workers if w.thread.is_alive()]
            failed = next((w for w in workers if w.error is not None), None)
            if failed is not None:
                why = f"worker {failed.index} failed: {type(failed.error).__name__}: {failed.error}"
            elif self._steps.problem:
                why = self._steps.problem
            elif not alive:
                self.pool.reset()
                return
            elif time.monotonic() > deadline:
                why = f"the job did not end within {self.timeout_s:g} s ({self._where(workers)})"
            else:
                alive[0].thread.join(0.05)
        self.pool.broken = why
        running = [w for w in workers if w.thread.is_alive()]
        if running:
            why += f"; worker(s) {[w.index for w in running]} did not end (left blocked: end this process to end them)"
        stacks = self._stacks(running)  # where each blocked worker waits (which run of which step), in the message
        why += "".join(f"\n--- worker {index} is blocked in ---\n{stack}" for index, stack in sorted(stacks.items()))
        raise ThreadJobError(why, "\n".join(f"--- worker {w.index} ---\n{w.trace}" for w in workers if w.trace))

    @staticmethod
    def _stacks(workers):
        """{worker index: the Python stack its thread is blocked in}."""
        frames = sys._current_frames()
        return {w.index: "".join(traceback.format_stack(frames[w.thread.ident]))
                for w in workers if w.thread.ident in frames}

    @staticmethod
    def _work(script, worker):
        try:
            with worker.context.acting():
                worker.result = script()
        except BaseException as e:  # noqa: B902 (a worker's SystemExit fails its job, as a process's exit would)
            worker.trace = traceback.format_exc()
            worker.error = e

    @staticmethod
    def _where(workers):
        """Each worker's last step line, or that it started none."""
        return "; ".join(f"worker {w.index}: " + next((m.text() for m in reversed(w.lines)
                                                       if isinstance(m, control_lines.Step)), "no synchronized step")
                         for w in workers)


class _Steps:
    """The launcher's step ledger (step_ledger.py), fed by the worker threads' control lines as they come."""

    def __init__(self):
        self._ledger, self._lock, self.problem = StepLedger(), threading.Lock(), None

    def heard(self, rank, message):
        with self._lock:
            if isinstance(message, control_lines.Step):
                problem = self._ledger.started(f"worker.{rank}", message.step, message.digest, message.name)
            elif isinstance(message, control_lines.Done):
                problem = self._ledger.finished(f"worker.{rank}", message.steps)
            else:
                return
            self.problem = self.problem or problem
