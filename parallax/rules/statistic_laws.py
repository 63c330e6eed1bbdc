"""The laws of a statistic of the batch, and the reasons a statistic follows none, as batch_statistics.py finds them
and the plan records them: how the workers' values combine into one device's value (MEAN, MAX, MIN), what the value
on a whole batch is of the values on its parts (SUM, AVERAGE, MAX, MIN), and why a statistic stays each worker's own.
Apart from batch_statistics.py, so that the rules that rewrite a statistic (statistics_combined, fused_batch_norm,
gathered_statistics) read the laws without the finding."""
MEAN, MAX, MIN = "mean", "max", "min"  # how the workers' values combine into what each worker reads
SELECTION = "selection"  # a value the examples change that follows no law
SUM, AVERAGE = "sum", "average"  # what the value on a whole batch is of the values on its parts (and MAX, MIN)
WHOLE = "whole"  # a sum read whole for the gradients (BatchStatistics.read_whole): every part reads one device's
COMBINED = {SUM: MEAN, AVERAGE: MEAN, MAX: MAX, MIN: MIN}  # a sum's workers' mean is S / N; an average's is it
FOR_UPDATES = {SUM: SUM, AVERAGE: MEAN, MAX: MAX, MIN: MIN}  # an update reads one device's value: the whole sum
UNKNOWN_GRADIENT = "its gradient cannot be told from the gradients of its op's other outputs"
EXTREME_WITH_GRADIENT = ("a maximum or minimum of values computed from variables: its gradient belongs to the one "
                         "worker whose example holds it")
FUSED_IN_FUNCTION = ("a fused batch norm in training mode inside a graph function, as a tf.cond on a `training` "
                     "tensor builds: its statistics stay each worker's own; build the training graph with training="
                     "True (a Python bool)")
PAIRWISE = ("it pairs the batch's examples with each other (the batch is on two of its axes, as in the logits of "
            "in-batch negatives): each worker pairs only its own examples, where one device pairs the whole batch's")
NO_LAW = "its value on the whole batch is no sum, mean, maximum or minimum of its values on the parts"
SELECTS = ("a selection of the batch's examples computed from variables (its top k, its first example): gradient "
           "flows only into the examples it selects, each worker's from its own batch")
DATA_SET_COUNT = ("a mean over a number of elements that parallax could not tie to the batch's size (the data may "
                  "set it, as a boolean mask's count or a padded length does; or a v1 loop builds the rows): each "
                  "worker divides by its own count; divide a sum by a count instead")
