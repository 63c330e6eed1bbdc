"""The core every stage stands on: TF graph utilities (graph_utils) and graph surgery (graph_surgery), a text table.
(The errors are `parallax.errors`, the public spelling; they belong to this layer.) Imports nothing of parallax
above it."""
