"""Every rule that rewrites the graph (rules/rule.py's interface), in the order the pipeline applies them
(rewrite/pipeline.py): one pass each, after the graph's copy and before any mode's own passes."""
from parallax.rules import (batch_draws, batchless_writes, fused_batch_norm, loss_seeds, padded_inputs, paired_rows,
                            statistics_combined)

RULES = (loss_seeds.RULE, padded_inputs.RULE, batch_draws.RULE, batchless_writes.RULE, statistics_combined.RULE,
         paired_rows.RULE, fused_batch_norm.RULE)
