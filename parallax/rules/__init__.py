"""Stage 3, the equivalence rules: each finds where N workers with batch b would differ from one device with batch
N*b (statistics of the batch, rows across workers, the loss's law, random draws, padded inputs, example counts,
state writes, input sharding) and records in the plan what makes them equal; the modules that also rewrite say
how, for the rewrite stage to apply."""
