"""Writes of the training step that do not read its batch, made to wait for it: the end of the data changes nothing.

When an input ends (a tf.data iterator's OutOfRangeError at the end of an epoch), TF stops the step, but by then a
device has run what was ready without the batch: sparse Adam's slot decays (`m *= beta1`, `v *= beta2`, before the
rows' scatter-add) run in the failing step, on one device in practice always (300 of 300 epoch ends), though TF
promises no order. Held on a parameter server they are the chief's, after every worker's arrival, which a step that
failed at its input never makes; held by every worker (MPI, HYBRID's replicas) each worker ran them. So the modes
differed from one another at each epoch's end (1.3e-3 after one, 1.5e-2 after three).

The rule, the same in every mode: a step whose input ends writes nothing. Each write in the step that does not read
an input that can end (an iterator's or a queue's, not a fed placeholder) waits for the step's inputs; the runner
warns, at the first end of the data, that one device would have run those writes (docs/modes.md).
"""
from parallax.rules import example_counts
from parallax.core import graph_utils
from parallax.rules.rule import Rule


def writes_without_the_batch(graph, update_ops):
    """((write op, (the input ops it must wait for, ...)), ...) for the training step, the ops the fetches that run
    `update_ops` (names) run: its writes outside control flow that read no input that can end, when it reads one."""
    updates = [graph.get_operation_by_name(n) for n in update_ops]
    fetched = [op for op in graph_utils.descendants(updates) if not graph_utils.consumers(op)]  # train ops, groups
    step = graph_utils.ancestors(fetched)
    # What can end: the inputs whose examples a step counts (example_counts.py), but a fed placeholder.
    inputs = sorted({t.op for t in example_counts.source_inputs(graph) if t.op in step and
                     not t.op.type.startswith("Placeholder")}, key=lambda op: op.name)
    if not inputs:
        return ()
    fed_by, feeding = graph_utils.descendants(inputs), graph_utils.ancestors(inputs)  # no edge may close a cycle
    writes = sorted((op for op in step if graph_utils.is_writer(op) and op not in fed_by and op not in feeding and
                     op._get_control_flow_context() is None), key=lambda op: op.name)
    return tuple((op.name, tuple(i.name for i in inputs)) for op in writes)


def wait_for_the_batch(graph, writes):
    """Each write of `writes` (find's records) waits for its inputs: a control edge from each."""
    for write, inputs in writes:
        op = graph.get_operation_by_name(write)
        op._add_control_inputs([graph.get_operation_by_name(name) for name in inputs
                                if graph.get_operation_by_name(name) not in op.control_inputs])


def waits_for_the_batch(graph, writes):
    """The fact `wait_for_the_batch` provides: every write has its inputs among its control inputs."""
    return all({graph.get_operation_by_name(n) for n in inputs} <= set(graph.get_operation_by_name(w).control_inputs)
               for w, inputs in writes)


def note(writes, step):
    """The warning at the first end of the data, in synchronized step `step`."""
    shown = ", ".join(w for w, _ in writes[:4]) + (f" and {len(writes) - 4} more" if len(writes) > 4 else "")
    return (f"the data ended in synchronized step {step}. One device runs, in the step where its input ends, the "
            f"writes that do not read the batch before the end stops it ({shown}: an optimizer's slot decays, as "
            f"sparse Adam's); in parallax those writes wait for the batch, so a step whose input ends writes nothing, "
            f"in every mode, and the variables differ from one device's by that partial step. Run a whole number of "
            f"batches per epoch (a known step count, or ds.repeat()) to avoid the partial step")


def apply(site):
    wait_for_the_batch(site.graph, site.plan.batchless_writes)


def holds(graph, plan):
    return waits_for_the_batch(graph, plan.batchless_writes)


def find(site):
    return {"batchless_writes": writes_without_the_batch(site.graph, site.plan.update_ops)}


RULE = Rule("wait_for_the_batch", ("batchless_writes",), "writes_wait_for_the_batch", apply, holds, find,
            doc="each write of the training step that reads no input that can end waits for the step's inputs: a "
                "step whose input ends (an epoch's) writes nothing, in every mode")
