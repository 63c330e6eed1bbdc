"""The three models as every peer builds them: the very classes of models/ (same layers, initial values, optimizer
and input stream), with two hooks a peer needs. `shard` turns the one-device example stream into a worker's share:
the peers use `Dataset.shard(workers, rank)` before batching, so the workers' batches of a step hold exactly the
examples of one device's global batch (the order within it does not change a mean loss). `wrap_optimizer` wraps the
model's own optimizer (Horovod's DistributedOptimizer, SyncReplicasOptimizer)."""
import argparse
import importlib
import os
import sys
from typing import NamedTuple

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models")
NAMES = ("lm", "resnet", "recsys")
sys.path[:0] = [*(os.path.join(MODELS, name) for name in NAMES), MODELS]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import lm  # noqa: E402
import recsys  # noqa: E402
import resnet  # noqa: E402

MODULES = {"lm": lm, "resnet": resnet, "recsys": recsys}


class Built(NamedTuple):
    train_op: object
    loss: object
    count: object  # units in a worker's batch
    unit: str  # what the log line counts: models/training.py's unit for the model
    global_step: object


def parse_args(name, argv):
    """The model's own options (models/<name>'s parse_args)."""
    return MODULES[name].parse_args(argv)


def build(name, args, shard, wrap_optimizer):
    """Model `name` in the current graph, reading `shard(stream)` and training with `wrap_optimizer(optimizer)`."""
    if name == "lm":
        windows = shard(lm.token_windows(args.data_dir, args.num_steps, seed=args.seed))
        model = lm.Model(windows.batch(args.batch_size), args, len(lm.vocabulary(args.data_dir)),
                         wrap_optimizer=wrap_optimizer)
        return Built(model.train_op, model.loss, model.words_per_batch, "words", model.global_step)
    if name == "resnet":
        examples = shard(resnet.train_examples(seed=args.seed))
        model = resnet.Model(examples.batch(args.batch_size), args, wrap_optimizer=wrap_optimizer)
        return Built(model.train_op, model.loss, model.examples_per_batch, "images", model.global_step)
    examples = shard(recsys.train_examples(args.data_dir, seed=args.seed))
    model = recsys.Model(examples.batch(args.batch_size), args, wrap_optimizer=wrap_optimizer)
    return Built(model.train_op, model.loss, model.examples_per_batch, "examples", model.global_step)


def keras_model_and_args(argv=None):
    """A Keras peer's --model (its Keras module: keras_module) and that model's own options, parsed."""
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--model", required=True, choices=NAMES)
    peer, rest = own.parse_known_args(argv)
    module = keras_module(peer.model)
    return module, module.parse_args(rest)


def keras_module(name):
    """The Keras version of model `name` (models/<name>/<name>_keras.py): parse_args, train_examples (the one-device
    stream), batched(examples, batch_size, args), build (the compiled model), fit (one epoch of --steps), UNIT
    and units_per_batch(args) (what the log line counts), WEIGHTS (the weights file's name)."""
    return importlib.import_module(f"{name}_keras")
