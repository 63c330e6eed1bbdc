"""The one interface of a one-device equivalence rule, and the table of them.

A rule finds something in the user's graph that N workers would compute differently from one device (a mean's
gradient seeds, a padded input, a random draw over the batch, a statistic of the batch, rows that pair examples, a
fused batch norm, a write that does not wait for the batch), and planning records what it found in the plan's
fields (plan/planning.py calls its finder). A rule then has the same three entry points:
- `applies(plan)`: whether the plan recorded anything for it (any of its `fields` set);
- `apply(site)`: rewrite the graph as the plan says, for one worker (`site`: the graph, the collectives, the worker
  and the plan);
- `holds(graph, plan)`: check that the rewritten graph does it; the pipeline runs this after the rule's pass
  (the fact `fact`) and fails the rewrite, naming the pass, if it does not.
The rewrite's pipeline (rewrite/pipeline.py) turns each rule into a pass of the rule's name, in the order of RULES.
"""
import dataclasses
from typing import Any, Callable, Tuple


@dataclasses.dataclass(frozen=True)
class RewriteSite:
    """What a rule's rewrite works on: one worker's copy of the user's graph."""
    graph: Any  # tf.Graph
    plan: Any  # plan.records.Plan
    worker_id: int
    collective_ops: Any  # the plan's collective backend (parallax/collectives), when it uses collectives


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str  # the pass that applies it: what it does to the graph
    fields: Tuple[str, ...]  # the Plan fields that record what it found
    fact: str  # what the rewritten graph then holds, checked by `holds`
    apply: Callable[[RewriteSite], None]
    holds: Callable[[Any, Any], bool]  # (graph, plan) -> whether the rewrite did it
    uses_collectives: bool = False  # its rewrite adds collective ops every worker must run
    doc: str = ""  # one sentence: what one device computes that the rule keeps

    def applies(self, plan):
        return any(getattr(plan, f) for f in self.fields)
