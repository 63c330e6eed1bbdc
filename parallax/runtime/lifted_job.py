"""What the runners of lifted TF2 code share (step_runner.py's StepRunner, keras_runner.py's KerasRunner): the job
they join at the first step with the lifted graph, the eager values loaded into it then and written back at the
end (eager_values.py), and their life as context managers."""
from parallax.errors import ParallaxError
from parallax.runtime.eager_values import EagerValues


class LiftedJob:
    def __init__(self, join, report=None):
        """`join(graph)`: get_runner's v1 path for the lifted graph, which returns its Runner; `report(error)`:
        get_runner's, for a refusal raised at the first step (printed as one line if it ends the process)."""
        self._join, self._report = join, report or (lambda error: None)
        self._runner = self._values = None
        self._closed = False

    @property
    def closed(self):
        return self._closed

    @property
    def runner(self):
        """The v1 Runner of the lifted graph (None before the first step)."""
        return self._runner

    def _join_job(self, lift):
        """`lift()` (the code lifted at the first step; its refusal, a ParallaxError, is reported as get_runner's),
        then the job of its graph joined (a script run by hand launches it here, and exits with its status) with the
        eager variables' values loaded into it. Returns what `lift` returned."""
        try:
            lifted = lift()
        except ParallaxError as error:
            self._report(error)
            raise
        self._values = EagerValues(lifted.graph, lifted.variables)
        self._runner = self._join(lifted.graph)
        self._values.load(self._runner)
        return lifted

    def _end_job(self):
        """The job's values into the eager variables, then the job ended for this process."""
        if self._runner is None or self._runner.closed:
            return
        try:
            self._values.write_back(self._runner)
        finally:
            self._runner.close()

    def close(self):
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if exc_type is not None and self._runner is not None:
            self._closed = True
            self._runner.__exit__(exc_type, exc_value, traceback)  # a failure: the launcher hears of it, not "done"
            return False
        self.close()
        return False
