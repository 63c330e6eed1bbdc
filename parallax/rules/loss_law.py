"""Whether the training loss is a sum over the batch: what Config.average_dense/average_sparse left at None (the
default) are decided from.

One device's gradient of a sum over N*b examples is the *sum* of the workers' gradients, of a mean their mean.
So the workers' gradients are averaged unless every loss `tf.gradients` was taken of (capture/gradients.py records them) is
a sum over the batch: its value on a random batch is, on every trial, the sum of its values on the parts of each of
two splits of it (batch_samples.py), and the examples change it. The loss tf.gradients differentiates is the sum of
the loss tensor's elements (its default seed is ones), so a per-example loss vector handed to `minimize` is a sum
too. A mean, a sum divided by a count of the batch (rule 7), a loss with batch normalization: no sum, averaged. A
sum plus terms that are means (a term the batch does not change, as a weight penalty, or a mean over the examples:
its value on the whole batch is the mean of its parts', weighted by their examples) is neither a sum nor a mean:
no setting of the averaging makes it one device's, and it is averaged; each loss's own law (`laws`) lets
loss_seeds.py start each loss's gradients as one device's share, and scale its mean terms' (loss_terms.py).
"""
from typing import Dict, NamedTuple, Tuple

import numpy as np

from parallax.rules import batch_draws, batch_statistics, loss_terms
from parallax.capture import gradients as capture
from parallax.analysis.batch_samples import is_mean_of_parts, is_sum_of_parts, sampled
from parallax.analysis.batch_shapes import per_worker_inputs

SUM, MEAN, SUM_PLUS_MEANS = "sum", "mean", "sum plus means"  # a loss's law; MEAN: any other (averaged)
SUMMED = "the loss was found to be a sum over the batch (on random batches), so gradients are summed over workers"
AVERAGED = "the loss was not found to be a sum over the batch, so gradients are averaged over workers"
NOT_CHECKED = "the loss could not be checked on random batches, so gradients are averaged over workers, as for a mean"
UNCHECKED = ("the loss could not be checked on random batches (it could not be run, or a random draw it reads "
             "could not be made what a worker reads), so gradients are averaged over workers, as for a mean; set "
             "Config.average_dense/average_sparse to False if it is a sum")
UNCHECKED_LOSS = "unchecked_loss"  # the kind of the plan's note that says UNCHECKED


class LossReading(NamedTuple):
    """What laws_and_means found of the losses."""
    laws: Dict[str, str]  # {loss tensor name: SUM, SUM_PLUS_MEANS or MEAN}; {} where they could not be checked
    means: Dict[str, Tuple[str, ...]]  # {loss: names of its batch terms that are means}
    sentence: str  # what explain's premise says of the averaging: SUMMED, AVERAGED or NOT_CHECKED
    unchecked: str  # "" or the warning why the losses could not be checked (UNCHECKED and its likely cause)

    def notes(self):
        """The plan's notes of this rule, (kind, text) each: the losses that could not be checked."""
        return ((UNCHECKED_LOSS, self.unchecked),) if self.unchecked else ()

FIXED_BATCH = ("; its inputs have a fixed first dimension ({}): if it is the batch's size written in, the graph may "
               "depend on it (a reshape to it), but the loss is run on batches of other sizes to check it and to "
               "find the statistics of the batch it reads (a sum of weights it is divided by would stay each "
               "worker's own): give the inputs an unknown batch size (placeholder shape [None, ...], Dataset.batch "
               "without drop_remainder) and read sizes from tf.shape; if an input is no examples but fed alike to "
               "every worker (a table of class weights), mark it with parallax.shared_input")
OTHER_AXIS = ("; its inputs seem to hold the batch on another axis than the first ({}: time-major?), but parallax "
              "takes each per-worker input's first axis for its examples, to check the loss and to find the "
              "statistics of the batch it reads (a sum over a mask of tokens it is divided by would stay each "
              "worker's own): feed the inputs batch-major and transpose them in the graph")


def unchecked(graph):
    """UNCHECKED, and where the per-worker inputs have a static first dimension, what that may have to do with it:
    the batch's size written in (every dimension known), or the batch on another axis (a later one unknown)."""
    static = [t for t in per_worker_inputs(graph) if t.shape[0] is not None]
    fixed = sorted(f"{t.name} {t.shape.as_list()}" for t in static if t.shape.is_fully_defined())
    other = sorted(f"{t.name} {t.shape.as_list()}" for t in static if not t.shape.is_fully_defined())
    return UNCHECKED + (OTHER_AXIS.format(", ".join(other[:3])) if other else "") + \
        (FIXED_BATCH.format(", ".join(fixed[:3])) if fixed else "")


def decide(graph, statistic_laws=(), draws=()):
    """(whether to average the workers' gradients, the sentence explain states): averaged unless every loss is a
    sum (laws)."""
    reading = laws_and_means(graph, statistic_laws, draws)
    return averages(reading.laws), reading.sentence


def averages(found):
    """Whether the workers' gradients are averaged, given each loss's law (`laws`): unless every loss is a sum."""
    return not (found and all(law == SUM for law in found.values()))


def laws(graph, statistic_laws=(), draws=()):
    """({loss tensor name: SUM, SUM_PLUS_MEANS or MEAN}, the sentence explain states); {} where the losses could not
    be checked. laws_and_means says what SUM_PLUS_MEANS is."""
    reading = laws_and_means(graph, statistic_laws, draws)
    return reading.laws, reading.sentence


def _unchecked(warning):
    return LossReading({}, {}, NOT_CHECKED, warning)


def laws_and_means(graph, statistic_laws=(), draws=()):
    """A LossReading: laws' {loss: law}, {loss: names of its batch terms that are means}, the sentence, the warning
    where the losses could not be checked. SUM_PLUS_MEANS: the
    loss's terms (loss_terms.py) that read the batch and are not means over it add up to a sum, and its others are
    means: terms the batch does not change (a weight penalty), or means over the examples (named in the second
    value). The parts read what the rewrite makes a worker read: of each statistic the rewrite combines
    (`statistic_laws`, (tensor, law): batch_statistics.py), one device's value (half of it for a sum); of each draw
    it splits (`draws`, (op, batch axis): batch_draws.py), their examples' values of one device's draw. So a sum of
    per-example losses that read the batch's mean, or that drop units out, is a sum."""
    names = {op.name for op in graph.get_operations()}
    losses = [graph.get_tensor_by_name(name) for name in capture.loss_records(graph)
              if name.rsplit(":", 1)[0] in names]
    if not losses:
        return _unchecked(UNCHECKED)
    found, means = {t.name: MEAN for t in losses}, {}
    split = {t.name: loss_terms.split(graph, t) for t in losses}
    fetched = losses + [term for batch, _ in split.values() for term, _ in batch if term not in losses]
    # A sampler's output over the batch merged with the time steps is read in either layout: only the right one
    # can make the parts add up to the whole (batch_samples.merged_as_split).
    for layout in ("example-major", "time-major"):
        held = batch_draws.held_as_rewritten(graph, losses, draws, merged=layout)
        if held is None:
            return _unchecked(UNCHECKED)
        # A value of one device's rows (paired_rows.py) is read by each part as its examples' rows.
        held.update(batch_statistics.held_as_combined(statistic_laws))
        samples = sampled(graph, fetched, held=held)
        if not samples:
            return _unchecked(unchecked(graph))
        for t in losses:
            if found[t.name] != MEAN:
                continue  # found in the other layout
            # The terms first: a penalty whose value is 0 at the initial values (of variables initialized to
            # zeros) makes the whole look like a sum there, but not once training has moved them.
            mean_terms = _mean_terms(samples, *split[t.name])
            found[t.name] = SUM_PLUS_MEANS if mean_terms is not None else SUM if _is_sum(samples[t.name]) else MEAN
            if mean_terms:
                means[t.name] = mean_terms
        if not averages(found) or not any(getattr(f, "merged", False) for f in held.values()):
            break
    return LossReading(found, means, AVERAGED if averages(found) else SUMMED, "")


def _mean_terms(samples, batch, constant):
    """The names of the batch terms that are means over the examples, when the other batch terms add up to a sum
    and some term (one of those, or a constant one) is a mean; else None."""
    means = tuple(t.name for t, _ in batch if _is_mean(samples[t.name]))
    summed = [(t, sign) for t, sign in batch if t.name not in means]
    if not summed or not (means or constant) or not _is_sum(_signed_total(samples, summed)):
        return None
    return means


def _signed_total(samples, terms):
    """Per trial, each part's sum of the terms' values, each with its sign."""
    trials = len(samples[terms[0][0].name])
    return [tuple(sum(sign * samples[t.name][trial][k] for t, sign in terms)
                  for k in range(len(samples[terms[0][0].name][trial]))) for trial in range(trials)]


def _is_sum(trials):
    totals = _varying_totals(trials)
    return totals is not None and all(is_sum_of_parts(parts, rtol=1e-4, atol=1e-6) for parts in totals)


def _is_mean(trials):
    """Whether a value the examples change is, on every trial, the mean of its values on the parts of each split,
    weighted by their examples."""
    totals = _varying_totals(trials)
    return totals is not None and all(is_mean_of_parts(parts, rtol=1e-4, atol=1e-6) for parts in totals)


def _varying_totals(trials):
    """Per trial, each part's sum of the value's elements (what tf.gradients differentiates); None when the
    examples do not change it (a term of the variables alone, or a mean of zeros)."""
    totals = [[float(np.sum(v)) for v in parts] for parts in trials]
    return None if all(len(set(parts)) == 1 for parts in totals) else totals
