"""The one part of the package pyproject.toml cannot declare: the bind shim, a C library (not a Python module)
preloaded into TF's processes so that their gRPC servers listen on their cluster address only
(parallax/process/bind_shim.py). Everything else is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("parallax.process._bind_shim", ["parallax/process/bind_shim.c"], libraries=["dl"])])
