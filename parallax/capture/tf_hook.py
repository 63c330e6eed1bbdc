"""Install gradient capture as soon as TensorFlow is imported, without importing it ourselves."""
import importlib.abc
import importlib.util
import sys


def install_capture_when_tensorflow_loads():
    if "tensorflow" in sys.modules:
        _install()
    elif not any(isinstance(f, _TensorFlowFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TensorFlowFinder())


def _install():
    from parallax.capture import gradients as capture
    capture.install()


class _TensorFlowFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of the top-level `tensorflow` package."""

    def find_spec(self, name, path, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _CaptureAfterExec(spec.loader)
        return spec


class _CaptureAfterExec(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _install()

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._loader, name)
