"""Where `parallax.shard` cuts the stream: right before the batch, past every transform that is not element-wise.

An element-wise shard (`ds.shard(N, i)`: every N-th element, from the i-th) gives each worker its share of one
device's batch only when nothing between the shard and the batch moves, drops or adds elements: the union of the
workers' k-th batches of b is then one device's k-th batch of N*b. A `shuffle`, `filter`, `take`, `repeat`,
`unbatch` or `interleave` written after `parallax.shard` would act on each worker's share instead of the stream:
`parallax.shard(ds).shuffle(64, seed=7).batch(b)` drew other batches than one device's `ds.shuffle(64,
seed=7).batch(N*b)` (a CTR model's embedding 0.33 off, relative, after 12 steps, silently). So the dataset
`parallax.shard` returns keeps the stream whole and defers the cut: each such transform applies to the whole
stream, the same in every worker, and the shard moves after it; element-wise transforms (`map`, `prefetch`,
`cache`, `with_options`) stay on the share, so each worker maps only its own elements; a batching transform takes
the share. Every worker then computes the whole stream up to the cut (its input's work grows N-fold there); a
`repeat` or `take` before the shard costs the same.

A transform asked for no deterministic order (`interleave(..., deterministic=False)`) takes the share, as written:
each worker's order of the whole stream would be its own, and shares of different orders overlap. (Options that
make the whole pipeline nondeterministic, `with_options` with `deterministic = False`, reorder the transforms
before the cut too, as they reorder a parallel map before the shard: every worker must see one order.)

A transform that draws random numbers with no seed at all (no graph seed, no op seed: `ds.shuffle(1000)`) would
draw other numbers in every worker, and the shares of different permutations overlap: in a job, it is seeded
with a number every worker derives from the job (the launcher's job directory); alone, it is left as written.
"""
import hashlib
import inspect

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops

from parallax.process.protocol import ENV_JOB_DIR

tf1 = tf.compat.v1

ELEMENT_WISE = ("map", "prefetch", "cache", "with_options")
BATCHING = ("batch", "padded_batch", "ragged_batch", "sparse_batch", "group_by_window", "bucket_by_sequence_length",
            "rebatch")
REORDERING = ("concatenate", "enumerate", "filter", "flat_map", "ignore_errors", "interleave", "rejection_resample",
              "repeat", "scan", "shard", "shuffle", "skip", "snapshot", "take", "take_while", "unbatch", "unique",
              "window")
# Methods that make no dataset of the stream: they read the share, as before (apply calls its function with the
# deferred dataset itself, whose methods then decide).
NOT_TRANSFORMS = ("apply", "as_numpy_iterator", "cardinality", "fingerprint", "get_single_element", "options",
                  "reduce", "save")


def _job_seed(environ):
    job = environ.get(ENV_JOB_DIR)
    return None if not job else int.from_bytes(hashlib.sha256(job.encode()).digest()[:4], "little") & 0x7FFFFFFF


class DeferredShard(dataset_ops.UnaryUnchangedStructureDataset):
    """The worker's share of `whole` (element-wise), with `element_wise` [(method, args, kwargs)] replayed on it.
    As a dataset it is that share; its transforms decide where the cut goes (module docstring)."""

    def __init__(self, whole, element_wise, num_workers, worker_id, scope, environ):
        self._whole, self._element_wise = whole, list(element_wise)
        self._num_workers, self._worker_id, self._scope, self._environ = num_workers, worker_id, scope, environ
        with tf.name_scope(scope):
            share = whole.shard(num_workers, worker_id)
        self._share = share = _replayed(share, self._element_wise)
        super().__init__(share, share._variant_tensor)

    def __getattr__(self, name):
        # A tf.compat.v1 dataset's methods (make_one_shot_iterator, output_shapes) are the share's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._share, name)

    def _stream(self):
        """The whole stream with the element-wise transforms so far: what a reordering transform takes."""
        return _replayed(self._whole, self._element_wise)

    def _deferred(self, whole, element_wise=()):
        return DeferredShard(whole, element_wise, self._num_workers, self._worker_id, self._scope, self._environ)


def _replayed(ds, transforms):
    for name, args, kwargs in transforms:
        ds = getattr(ds, name)(*args, **kwargs)
    return ds


def _seeded(method, args, kwargs, environ):
    """kwargs with a job-wide seed where `method` takes one and nothing seeds it (module docstring)."""
    params = inspect.signature(method).parameters
    if "seed" not in params:
        return kwargs
    names = [p for p in params if p != "self"]
    given = kwargs.get("seed", args[names.index("seed")] if len(args) > names.index("seed") else None)
    seed = _job_seed(environ)
    if given is not None or tf1.get_default_graph().seed is not None or seed is None:
        return kwargs
    return {**kwargs, "seed": seed}


def _element_wise(name):
    def transform(self, *args, **kwargs):
        return self._deferred(self._whole, self._element_wise + [(name, args, kwargs)])
    return transform


def _reordering(name):
    method = getattr(tf.data.Dataset, name)

    def transform(self, *args, **kwargs):
        if kwargs.get("deterministic") is False:
            # Its order is each process's own: on the whole stream, the workers' shares would overlap.
            return getattr(self._share, name)(*args, **kwargs)
        stream = self._stream()
        return self._deferred(getattr(stream, name)(*args, **_seeded(method, args, kwargs, self._environ)))
    return transform


def _batching(name):
    def transform(self, *args, **kwargs):
        return getattr(self._share, name)(*args, **kwargs)
    return transform


for _name in ELEMENT_WISE:
    setattr(DeferredShard, _name, _element_wise(_name))
for _name in REORDERING:
    setattr(DeferredShard, _name, _reordering(_name))
for _name in BATCHING:
    setattr(DeferredShard, _name, _batching(_name))


def unclassified():
    """Public transforms of tf.data.Dataset that no list above names (a newer TF's): each needs a place here."""
    known = set(ELEMENT_WISE + BATCHING + REORDERING + NOT_TRANSFORMS)
    return sorted(n for n in dir(tf.data.Dataset) if not n.startswith("_") and n not in known
                  and isinstance(inspect.getattr_static(tf.data.Dataset, n), type(lambda: 0)))
