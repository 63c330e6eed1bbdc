"""Each worker's backward pass computes one device's values for its examples: a mean loss's gradients start at 1/N.

One device's mean loss over N*b examples is the mean of the workers' losses over their b: L = (1/N) sum_w L_w.
Averaging the workers' gradients gives one device's gradient only where the backward pass is linear in where it
starts (its seed, tf.gradients' default fill of ones shaped like the loss). Where it is not, a worker's backward
values for its examples are N times one device's, and what reads them differs: a gradient clipped elementwise on
its way (a tf.custom_gradient), an input's gradient used in the forward pass (an adversarial example). Starting a
mean loss's gradients at 1/N instead makes every value of a worker's backward pass one device's for its examples;
the workers' gradients are then summed, as they are for a sum, whose seed stays 1. Where the backward pass is
linear, both give the same gradient (bit for bit when N is a power of two).

The rule holds for the whole graph or not at all: every trained variable's gradient must start at default seeds
(a tf.gradients call given its own grad_ys, which the hooks record, or a gradient no seed reaches, turns it off).
It is used in synchronous training where the loss law decided the averaging (Config.average_* left at None).
"""
import numpy as np
import tensorflow as tf

from parallax.capture import gradients as capture
from parallax.core import graph_utils
from parallax.rules import loss_law, loss_terms
from parallax.rules.rule import Rule

MEAN, SUM = "mean", "sum"


def sentence(seeds, edges=()):
    """What explain's premise says of the averaging."""
    laws = {law for _, law in seeds}
    found = "the loss was not found to be a sum over the batch" if laws == {MEAN} else \
        "the loss was found to be a sum over the batch" if laws == {SUM} else \
        "some losses were found to be sums over the batch, and the others not"
    penalty = (f"; {len(edges)} input(s) of the gradient ops of mean terms (a weight penalty the batch does not "
               f"change, a mean over the examples) added to a summed loss are scaled by 1/N, so they count once") \
        if edges else ""
    return (f"{found}, so each worker's gradients of a mean loss start at 1/N (of a sum at 1): every value of its "
            f"backward pass is one device's for its examples, and the workers' gradients are summed{penalty}")


def loss_words(seeds, edges=()):
    """What the premise calls the loss."""
    laws = {law for _, law in seeds}
    plus = " (plus mean terms)" if edges else ""
    return "a mean over the batch" if laws == {MEAN} else f"a sum over the batch{plus}" if laws == {SUM} else \
        f"a sum over the batch{plus} where found one, else a mean"


def seeds_and_mean_terms(graph, analysis, laws, means=None):
    """(((seed op, MEAN | SUM), ...), the edges into the backward ops of summed losses' mean terms) of the graph's
    default seeds, each its loss's law by `laws` ({loss tensor: law}, loss_law.laws; a loss not in it is taken for
    a mean, as the law takes a loss it cannot check; a sum plus means whose terms' backward ops cannot be told too)
    and `means` ({loss: its batch terms that are means}, loss_law.laws_and_means); ((), ()) where the rule does not
    hold, or where no seed is a mean's and no edge is scaled (then nothing changes)."""
    inner = capture.inner_seeds(graph)
    seeds = {name: loss for name, loss in capture.default_seeds(graph).items()
             if graph.get_operation_by_name(name)._control_flow_context is None and name not in inner}
    if not seeds or None in seeds.values() or capture.given_seed_losses(graph):
        return (), ()
    reached = graph_utils.closure([graph.get_operation_by_name(name) for name in seeds],
                                  lambda op: [c for t in op.outputs for c in t.consumers()])
    for v in analysis.trained_variables:
        for p in v.parts:
            if any(graph.get_tensor_by_name(g.values).op not in reached for g in p.gradients):
                return (), ()
    found, edges = [], []
    for name, loss in sorted(seeds.items()):
        law = laws.get(loss, loss_law.MEAN)
        constant = loss_terms.edges(graph, graph.get_tensor_by_name(loss), name, (means or {}).get(loss, ())) \
            if law == loss_law.SUM_PLUS_MEANS else None
        edges += constant or ()
        found.append((name, SUM if law == loss_law.SUM or constant is not None else MEAN))
    if not edges and all(law == SUM for _, law in found):
        return (), ()
    return tuple(found), tuple(edges)


def scaled_inputs(seeds, edges):
    """Every op input a worker scales by its share 1/N: each mean seed's fill value (its input 1), and each edge
    into a summed loss's mean terms' backward ops."""
    return tuple(edges) + tuple((name, 1) for name, law in seeds if law == MEAN)


def scale(graph, seeds, edges, num_workers):
    """Scale the inputs `scaled_inputs` names by 1/N (in each input's dtype)."""
    loss_terms.scale(graph, scaled_inputs(seeds, edges),
                     lambda dtype: tf.constant(1.0 / num_workers, dtype, name="share"))


def is_scaled(graph, seeds, edges, num_workers):
    return loss_terms.is_scaled(graph, scaled_inputs(seeds, edges), num_workers)


def shares_as_held(seeds, edges, examples):
    """An `edit` for batch_samples.sampled: each input `scaled_inputs` names that the throw-away graph has is
    scaled by a share, which a part of `examples` reads at its share of the whole batch (the shares of a split add
    up to 1, as the workers' do)."""
    inputs = scaled_inputs(seeds, edges)

    def edit(graph):
        names = {op.name for op in graph.get_operations()}
        with graph.as_default():
            share = tf.compat.v1.placeholder_with_default(tf.constant(1.0, tf.float64), [], name="parallax_share")
        loss_terms.scale(graph, [e for e in inputs if e[0] in names], lambda dtype: tf.cast(share, dtype))
        return {share: lambda value, part: np.asarray(value) * len(part) / examples} if inputs else {}
    return edit


def apply(site):
    scale(site.graph, site.plan.loss_seeds, site.plan.mean_term_edges, site.plan.num_workers)


def holds(graph, plan):
    return is_scaled(graph, plan.loss_seeds, plan.mean_term_edges, plan.num_workers)


def find(site):
    """Each loss's seeds and its mean terms' edges, in synchronous training where the losses' laws decide the
    averaging (Config.average_dense and average_sparse both None); nothing otherwise."""
    if not (site.plan.sync and site.averaging_left_to_the_loss):
        return {}
    seeds, edges = seeds_and_mean_terms(site.graph, site.analysis, site.losses.laws, site.losses.means)
    return {"loss_seeds": seeds, "mean_term_edges": edges}


RULE = Rule("scale_loss_seeds", ("loss_seeds", "mean_term_edges"), "seeds_scaled", apply, holds, find,
            doc="a mean loss's gradients start at 1/N, so that each worker's backward pass computes one device's "
                "values for its examples")
