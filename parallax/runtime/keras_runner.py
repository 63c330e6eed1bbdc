"""`parallax.get_runner(model, ...)`: a compiled Keras model's own `fit`, `evaluate` and `predict` run as a parallax
job, through the same plan, rewrite and synchronization as a v1 script's.

The model's train, test and predict steps (`Model.train_step`, `test_step`, `predict_step`) and its metrics' reset
are lifted into one v1 graph (capture/function_step.py), in which they share the model's, the optimizer's and the
metrics' variables. Keras's loops stay Keras's: the runner replaces the functions they call per step
(`make_train_function` and its two siblings), which feed each batch to the job. The rewrite combines each metric's
state over the workers as it combines any statistic of the batch, so the logs a step returns are the global batch's.

What a batch is:
- arrays (or anything Keras batches itself, a `validation_split` too): `batch_size` is the global batch, as on one
  device, and each worker runs its rows of it (`rows_of`), so every worker runs the same steps;
- a `tf.data.Dataset`: each worker's own batches, as `parallax.shard(ds).batch(b)` makes them.
`predict` runs every row on every worker: it returns one device's predictions everywhere. `model.save` and
`save_weights` write on the chief alone, as ModelCheckpoint does (keras_callbacks.py).

The eager model is what Keras's callbacks and the user's code read: at each epoch's end and at the end of
`evaluate` (where Keras reads the metrics, before any callback of the epoch's end), the trained values are
written back into the model's, optimizer's and metrics' eager variables; and at each call's and each epoch's first
step, the eager variables that Python code changed since (a learning rate set by a callback, `set_weights`,
`load_weights`, EarlyStopping's best weights restored) are written into the job's.
"""
import numpy as np
import tensorflow as tf

from parallax.capture.function_step import lift_functions
from parallax.errors import ParallaxError, UnsupportedError
from parallax.runtime import keras_callbacks
from parallax.runtime.lifted_job import LiftedJob

tf1 = tf.compat.v1
TRAIN, TEST, PREDICT, RESET = "step", "test_step", "predict_step", "reset_metrics"
REPLACED = ("fit", "evaluate", "predict", "make_train_function", "make_test_function", "make_predict_function",
            "reset_metrics", "get_metrics_result", "save", "save_weights")  # replaced on this model alone


def is_keras_model(value):
    return callable(value) and all(callable(getattr(value, name, None)) for name in ("fit", "compile", "predict"))


def rows_of(value, worker_id, num_workers):
    """This worker's rows of a global batch: the k-th of `num_workers` contiguous parts, whose sizes differ by at
    most one, so that the workers' rows together are the batch, in order."""
    array = np.asarray(value)
    if array.ndim == 0:
        return array
    count = len(array)
    return array[count * worker_id // num_workers:count * (worker_id + 1) // num_workers]


def unpack_x_y_sample_weight(data):
    """(x, y, sample weights) of a batch, as both Keras generations unpack it (this module does not know which
    Keras the model is of: tf.keras may be the other one)."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if not 1 <= len(data) <= 3:
        raise UnsupportedError(f"a batch of {len(data)} parts: Keras takes (x,), (x, y) or (x, y, sample_weight)")
    return data + (None,) * (3 - len(data))


def _check_model(model):
    if not tf.executing_eagerly():
        raise UnsupportedError(
            "get_runner(model) needs eager execution, which this script turned off "
            "(tf.compat.v1.disable_eager_execution): remove that call")
    # Keras 2's Model is keras(.src).engine's or tf_keras's; Keras 3's trains through its TensorFlow trainer
    if not any(".engine." in cls.__module__ or cls.__name__ == "TensorFlowTrainer" for cls in type(model).__mro__):
        raise UnsupportedError(
            f"get_runner(model) takes a Keras model on TensorFlow (tf.keras, tf_keras, or Keras 3 with the "
            f"TensorFlow backend); this {type(model).__name__} trains with another backend: set "
            f"KERAS_BACKEND=tensorflow before importing keras")
    if getattr(model, "optimizer", None) is None or getattr(model, "compiled_loss", None) is None:
        raise UnsupportedError("get_runner(model) takes a compiled model: call model.compile(optimizer, loss, ...) "
                               "before get_runner")
    steps = getattr(model, "_steps_per_execution", None)  # Keras 2's: a variable
    steps = getattr(model, "steps_per_execution", 1) if steps is None else steps  # Keras 3's: an int
    steps = int(steps.numpy()) if hasattr(steps, "numpy") else int(steps or 1)
    if steps != 1:
        raise UnsupportedError(
            f"get_runner(model) was given a model compiled with steps_per_execution={steps}, whose train function "
            f"runs {steps} batches per call: parallax runs one step per batch. Compile it without "
            f"steps_per_execution")
    if any("LossScaleOptimizer" in cls.__name__ for cls in type(model.optimizer).__mro__):
        raise UnsupportedError(
            "get_runner(model) was given a model compiled for mixed precision (its optimizer is a "
            "LossScaleOptimizer, whose loss scale changes with the gradients' values): parallax does not support "
            "float16 training. Set tf.keras.mixed_precision.set_global_policy('float32') before building the model")


class KerasRunner(LiftedJob):
    def __init__(self, model, join, role, report=None, only_launches=False):
        """`join(graph)`: get_runner's v1 path for the lifted graph, which returns its Runner; `role`: this
        process's (its worker id decides which callbacks run before the job is joined); `report`: LiftedJob's;
        `only_launches`: this process (the script run by hand) launches the job at the first step and exits, so
        it runs no callback that writes a file (a TensorBoard log of its own) and prints no progress."""
        _check_model(model)
        super().__init__(join, report)
        self._model, self._role, self._lifted = model, role, None
        self._only_launches = only_launches
        self._sliced = []  # per running fit/evaluate/predict call, innermost last: whether its batches are global
        self._check_eager = False
        self._install()

    # ---- identity ---------------------------------------------------------------------------------------------
    @property
    def worker_id(self):
        return self._role.worker_id if self._runner is None else self._runner.worker_id

    @property
    def num_workers(self):
        return max(1, self._role.num_workers) if self._runner is None else self._runner.num_workers

    @property
    def is_chief(self):
        return self.worker_id == 0

    @property
    def _reports(self):
        """Whether this process runs the reporting callbacks and writes the model's files: the chief's alone."""
        return self.is_chief and not self._only_launches

    # ---- the model's methods, replaced on this model alone -----------------------------------------------------
    def _install(self):
        model = self._model
        originals = {name: getattr(model, name) for name in ("fit", "evaluate", "predict")}
        self._own = {name: model.__dict__.get(name) for name in REPLACED}  # what close() puts back
        model.fit = self._wrapped_call(originals["fit"], "x", fits=True)
        model.evaluate = self._wrapped_call(originals["evaluate"], "x")
        model.predict = self._wrapped_call(originals["predict"], "x")
        for kind, step in (("train", TRAIN), ("test", TEST), ("predict", PREDICT)):
            setattr(model, f"make_{kind}_function", self._function_maker(f"{kind}_function", step))
        model.reset_metrics = self._reset_metrics
        model.get_metrics_result = self._metrics_result
        if not self._reports:  # the chief's model is the one device's: the others write no file over its files
            model.save = model.save_weights = lambda *args, **kwargs: None
        model.train_function = model.test_function = model.predict_function = None

    def _wrapped_call(self, method, data_argument, fits=False):
        def call(*args, **kwargs):
            if self._closed:
                raise ParallaxError("this model's runner is closed; create a new one with get_runner(model, ...)")
            x = args[0] if args else kwargs.get(data_argument)
            if fits:
                kwargs = keras_callbacks.for_worker(kwargs, self._reports)
            elif not self._reports:
                kwargs.setdefault("verbose", 0)
            self._sliced.append(not isinstance(x, tf.data.Dataset))
            self._check_eager = True
            try:  # each fit and evaluate ends with Keras reading the metrics, which writes the job back
                return method(*args, **kwargs)
            finally:
                self._sliced.pop()
        return call

    def _function_maker(self, attribute, name):
        """The model's `make_<kind>_function`: Keras 2's returns the function, Keras 3's sets it on the model."""
        def run(iterator):
            if isinstance(iterator, list):  # Keras 3's predict: the batches of one execution, one (_check_model)
                (batch,) = iterator
                return self._step(name, batch)
            return self._step(name, next(iterator))

        def make(force=False):
            setattr(self._model, attribute, run)
            return run
        return make

    def _reset_metrics(self):
        type(self._model).reset_metrics(self._model)
        if self._runner is not None:
            self._runner.run(self._lifted.functions[RESET].op)

    def _metrics_result(self):
        """Keras reads the metrics at the end of an epoch and of an evaluation: the eager model is brought up to
        the job's state first (the callbacks that follow read its weights)."""
        self._write_back()
        return type(self._model).get_metrics_result(self._model)

    # ---- a step -------------------------------------------------------------------------------------------------
    def _step(self, name, data):
        if self._runner is None:
            self._start(data)
        if self._check_eager:
            self._push_changed()
        function = self._lifted.functions[name]
        if name == PREDICT:
            data = (unpack_x_y_sample_weight(data)[0],)
        elif self._sliced and self._sliced[-1]:
            data = tf.nest.map_structure(lambda v: rows_of(v, self.worker_id, self.num_workers), data)
        values = tf.nest.flatten(data)
        if len(values) != len(function.inputs):
            raise UnsupportedError(
                f"this model's steps were traced for batches of {len(function.inputs)} tensor(s) (the first "
                f"batch's structure) and now get {len(values)}: give fit, evaluate and predict batches of one "
                f"structure (x, y, and sample weights in each or in none)")
        feeds = {placeholder: np.asarray(value) for placeholder, value in zip(function.inputs, values)}
        outputs, _ = self._runner.run([function.outputs, function.op], feed_dict=feeds)
        return outputs

    def _start(self, data):
        """Lifts the model's steps for batches like `data` and joins the job (a script run by hand launches it
        here, and exits with its status)."""
        model = self._model
        x = unpack_x_y_sample_weight(data)[0]

        def reset():
            for metric in model.metrics:
                metric.reset_state()

        self._lifted = self._join_job(lambda: lift_functions({
            TRAIN: (model.train_step, (data,)), TEST: (model.test_step, (data,)),
            PREDICT: (lambda features: model.predict_step((features,)), (x,)), RESET: (reset, ())}))
        self._check_eager = False

    # ---- eager model and job, kept alike ----------------------------------------------------------------------
    def _write_back(self):
        """The job's values into the eager model (its variables, the optimizer's, the metrics')."""
        if self._runner is None or self._runner.closed:
            return
        self._values.write_back(self._runner)
        self._check_eager = True

    def _push_changed(self):
        """The eager variables that Python code changed since the last write-back, into the job."""
        self._check_eager = False
        self._values.load_changed(self._runner)

    def close(self):
        """End the job for this process; the eager model holds the trained values first."""
        if self._closed:
            return
        self._closed = True
        for name, own in self._own.items():
            if own is None:
                self._model.__dict__.pop(name, None)
            else:
                self._model.__dict__[name] = own
        self._model.train_function = self._model.test_function = self._model.predict_function = None
        self._end_job()
