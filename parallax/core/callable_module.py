"""Modules that are also their own main function: `parallax.shard(ds)`, `parallax.explain(graph, spec)`.

A function named like its module cannot simply be the package's attribute: importing the module (`from
parallax.explain import ...`, anywhere in the process) sets that attribute to the module. So the module itself is
made callable, and calls the function."""
import sys
import types


def make_callable(module_name, function):
    """Calling the module `module_name` (already in sys.modules) calls `function`."""
    class CallableModule(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return function(*args, **kwargs)

    sys.modules[module_name].__class__ = CallableModule
