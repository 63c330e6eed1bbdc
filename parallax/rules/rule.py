"""The one interface of a one-device equivalence rule, and the table of them.

A rule finds something in the user's graph that N workers would compute differently from one device (a mean's
gradient seeds, a padded input, a random draw over the batch, a statistic of the batch, rows that pair examples, a
fused batch norm, a write that does not wait for the batch). A rule has the same four entry points:
- `find(site)`: what it finds in the user's graph, as the values of the Plan fields it records (`fields` and
  `records`), from a `FindSite`: the graph, the plan before any rule, and what planning found before the rules (the
  losses' laws, the statistics and the random draws of the batch, which several rules and the gradient check read).
  Planning (plan/planning.py) sets exactly these fields, and refuses a finder that returns others;
- `applies(plan)`: whether the plan recorded anything for it (any of its `fields` set);
- `apply(site)`: rewrite the graph as the plan says, for one worker (`site`: the graph, the collectives, the worker
  and the plan);
- `holds(graph, plan)`: check that the rewritten graph does it; the pipeline runs this after the rule's pass
  (the fact `fact`) and fails the rewrite, naming the pass, if it does not.
The rewrite's pipeline (rewrite/pipeline.py) turns each rule into a pass of the rule's name, in the order of RULES.
"""
import dataclasses
from typing import Any, Callable, Dict, Tuple

from parallax.errors import PipelineError


@dataclasses.dataclass(frozen=True)
class FindSite:
    """What a rule's finder reads: the user's graph, and what planning found before any rule."""
    graph: Any  # tf.Graph
    analysis: Any  # capture's GraphAnalysis
    plan: Any  # plan.records.Plan: the variables' methods decided, no rule's fields set
    averaging_left_to_the_loss: bool  # Config.average_dense and average_sparse were both None
    losses: Any  # loss_law.LossReading
    statistics: Any  # batch_statistics.BatchStatistics
    draws: Any  # batch_draws.BatchDraws


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
    find: Callable[[FindSite], Dict[str, Any]]  # {field of `fields` or `records`: its value} for the plan
    records: Tuple[str, ...] = ()  # the other Plan fields `find` sets, which alone do not make it apply
    uses_collectives: bool = False  # its rewrite adds collective ops every worker must run
    doc: str = ""  # one sentence: what one device computes that the rule keeps

    def applies(self, plan):
        return any(getattr(plan, f) for f in self.fields)

    def found(self, site):
        """`find`'s fields, refused where it names a field the rule does not declare."""
        values = self.find(site)
        undeclared = set(values) - set(self.fields) - set(self.records)
        if undeclared:
            raise PipelineError(f"rule {self.name} found {sorted(undeclared)}, fields it does not declare: add "
                                f"them to its fields or records")
        return values
