"""Which of a `fit` call's callbacks a worker other than the chief runs.

Every worker runs Keras's loop, and so its callbacks. The callbacks that decide something about training
(EarlyStopping, a learning-rate schedule, TerminateOnNaN, the user's own) run on every worker: they read the global
batch's logs, the same on every worker, so every worker decides alike and stops at the same step. Those that only
report (the progress bar, ModelCheckpoint, TensorBoard, CSVLogger, RemoteMonitor) run on the chief alone, as on
one device: other workers would write the same files again, or print the same lines.
"""
REPORTING = ("ModelCheckpoint", "TensorBoard", "CSVLogger", "RemoteMonitor", "ProgbarLogger")


def reports_only(callback):
    return any(cls.__name__ in REPORTING for cls in type(callback).__mro__)


def for_worker(kwargs, reports):
    """`fit`'s keyword arguments for this process: unchanged where it `reports` (the chief); elsewhere, without the
    progress bar and the callbacks that only report."""
    if reports:
        return kwargs
    kwargs = dict(kwargs, verbose=0)
    callbacks = kwargs.get("callbacks")
    if type(callbacks).__name__ == "CallbackList":  # either Keras generation's: tf.keras may be the other one
        callbacks = callbacks.callbacks
    if callbacks:
        kwargs["callbacks"] = [c for c in callbacks if not reports_only(c)]
    return kwargs
