"""Stage 2, analysis: facts of the user's graph that every later stage reads: the trained variables, their
gradients and kinds (graph_analysis), what reads the input (row_keys, shared_inputs, sparse_inputs), which tensors
hold the batch's rows (batch_shapes, batch_sizes, batch_samples), the backward pass (backward_ops) and keyed
writes (keyed_writes)."""
