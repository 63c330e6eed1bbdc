"""parallax: automatic, equivalence-preserving data parallelism for v1-style TensorFlow graphs.

Install (CPU, what CI uses): `make install`. It creates `.venv` with tensorflow-cpu==2.15.1, numpy<2, mpi4py,
pytest, and Horovod 0.28.1 built from source with MPI and Gloo.

GPU extra (`pip install -e .[gpu]`): installs `tensorflow==2.15.1` instead of the CPU wheel. Horovod must then be
rebuilt against it with NCCL:

    HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 \
    HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
    pip install --no-build-isolation --no-cache-dir --force-reinstall horovod==0.28.1
"""
from setuptools import Extension, find_packages, setup

setup(
    name="parallax",
    version="0.1.0",
    description="Automatic, single-device-equivalent data parallelism for TensorFlow v1 graphs",
    long_description=__doc__,
    packages=find_packages(include=["parallax", "parallax.*"]),
    python_requires=">=3.9,<3.12",
    # TF and Horovod are installed by `make install` (Horovod must be built after TF, without build isolation),
    # so they are not listed here: pip would otherwise try to build Horovod in an isolated env and fail.
    install_requires=["numpy"],  # make install pins it: <2 with TF 2.15, 2.x with TF 2.21
    extras_require={
        "cpu": ["tensorflow-cpu==2.15.1", "mpi4py"],
        "gpu": ["tensorflow==2.15.1", "mpi4py"],
        "test": ["pytest"],
    },
    # Not a Python module: an LD_PRELOAD library that makes TF's gRPC servers listen on their cluster address only.
    ext_modules=[Extension("parallax.launcher._bind_shim", ["parallax/launcher/bind_shim.c"], libraries=["dl"])],
    entry_points={"console_scripts": ["parallax-launch = parallax.launcher.cli:main",
                                        "parallax-calibrate = parallax.launcher.calibrate:main"]},
)
