#!/usr/bin/env bash
# Idempotent set-up of everything parallax needs on a fresh Debian machine (run as root).
# Each step is skipped when its result is already present, so `make install` is cheap the second time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# TF=2.15 (default): tensorflow-cpu 2.15.1, numpy<2, Horovod built from source, in .venv.
# TF=2.21: the newest TF on the package index, numpy 2, tf_keras for tf.compat.v1.layers, no Horovod (parallax
# uses TF's own collectives there), in .venv-tf2.21.
TF=${TF:-2.15}
# The machine's python3 for TF 2.15 (its wheels stop at 3.11), Python 3.12 for TF 2.21, so that CI runs the suite on
# two Pythons (PYTHON=... chooses another; a venv of another Python is made again).
case "$TF" in
  2.15) VENV="$ROOT/.venv"; TF_PIN="2.15.1"; NUMPY="numpy<2"; HOROVOD=1; WANT_PY=python3 ;;
  2.21) VENV="$ROOT/.venv-tf2.21"; TF_PIN="2.21.0"; NUMPY="numpy>=2,<3"; HOROVOD=0; WANT_PY=python3.12 ;;
  *) echo "[install] TF=$TF is not one of 2.15, 2.21" >&2; exit 2 ;;
esac
# A pythonX.Y that runs: on PATH (pyenv's shim answers only for its active versions), else pyenv's own build.
find_python() {
  if "$1" -c '' 2>/dev/null; then command -v "$1"; return; fi
  ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"${1#python}".*/bin/"$1" 2>/dev/null | sort -V | tail -1
}
PY=${PYTHON:-$(find_python "$WANT_PY")}
if [ -z "$PY" ] || ! "$PY" -c '' 2>/dev/null; then
  echo "[install] no $WANT_PY here: install it (pyenv install 3.12), or give PYTHON=/path/to/python" >&2; exit 1
fi
APT_PACKAGES="libopenmpi-dev openmpi-bin cmake gcc g++ openssh-server openssh-client iproute2 slurm-client"

say() { printf '[install] %s\n' "$*"; }

missing_apt=""
for p in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing_apt="$missing_apt $p"
done
if [ -n "$missing_apt" ]; then
  if [ "$(id -u)" != 0 ]; then
    say "missing Debian packages:$missing_apt -- run 'make install' as root or apt-get install them"; exit 1
  fi
  say "apt-get install$missing_apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $missing_apt >/dev/null
fi

VPY="$VENV/bin/python"
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
if [ -x "$VPY" ] && [ "$(version_of "$VPY")" != "$(version_of "$PY")" ]; then
  say "$VENV runs Python $(version_of "$VPY"), not $(version_of "$PY"): creating it again"
  rm -rf "$VENV"
fi
if [ ! -x "$VPY" ]; then
  say "creating virtual environment at $VENV"
  "$PY" -m venv "$VENV"
  "$VPY" -m pip install -q --upgrade pip 'setuptools<70' wheel
fi

# Reinstall parallax when pyproject.toml, setup.py or the bind shim's source changed, or the shim library is missing
# (git clean).
SHIM=parallax/process/bind_shim.c
parallax_stale() {
  [ setup.py -nt "$VENV/.parallax-installed" ] || [ pyproject.toml -nt "$VENV/.parallax-installed" ] \
    || [ "$SHIM" -nt "$VENV/.parallax-installed" ] \
    || ! ls parallax/process/_bind_shim.cpython-"$(version_of "$VPY" | tr -d .)"-*.so >/dev/null 2>&1
}
# Everything present already (make test calls this before each of its phases): one Python process checks it all and
# says so, and the steps below, a Python process each, are skipped. The build check of Horovod ran once (its stamp).
if [ -x "$VPY" ] && ! parallax_stale && { [ "$HOROVOD" = 0 ] || [ -e "$VENV/.horovod-checked" ]; } \
   && ready=$("$VPY" - 2>/dev/null <<EOF
import matplotlib, mpi4py, numpy, parallax, pytest, sklearn, tensorboard, tensorflow as tf, xdist
assert tf.__version__ == "$TF_PIN", tf.__version__
assert tuple(map(int, xdist.__version__.split(".")[:2])) >= (3, 2), xdist.__version__
if $HOROVOD:
    import horovod, horovod.tensorflow
    print("tensorflow", tf.__version__, "horovod", horovod.__version__)
else:
    import tf_keras
    print("tensorflow", tf.__version__, "numpy", numpy.__version__, "(no Horovod: collectives are TF's own)")
EOF
); then
  say "ok: $ready"
  exit 0
fi

if ! "$VPY" -c "import tensorflow as tf, numpy, mpi4py, pytest; assert tf.__version__ == '$TF_PIN'" 2>/dev/null; then
  say "installing tensorflow-cpu==$TF_PIN, $NUMPY, mpi4py, pytest"
  "$VPY" -m pip install -q "tensorflow-cpu==$TF_PIN" "$NUMPY" mpi4py pytest
fi
# make test runs its tests three at a time, idle processes taking queued tests (--dist worksteal: xdist >= 3.2).
if ! "$VPY" -c 'import sys, xdist; sys.exit(tuple(map(int, xdist.__version__.split(".")[:2])) < (3, 2))' 2>/dev/null; then
  say "installing pytest-xdist>=3.2"
  "$VPY" -m pip install -q "pytest-xdist>=3.2"
fi

if [ "$HOROVOD" = 0 ] && ! "$VPY" -c 'import tf_keras' 2>/dev/null; then
  say "installing tf_keras==$TF_PIN (Keras 2, for tf.compat.v1.layers with TF_USE_LEGACY_KERAS=1)"
  "$VPY" -m pip install -q "tf_keras==$TF_PIN"
fi

# Keras's TensorBoard callback (tests/equivalence/test_keras_fit.py): TF 2.15 depends on TensorBoard, TF >= 2.16
# no longer does.
if ! "$VPY" -c 'import tensorboard' 2>/dev/null; then
  say "installing tensorboard"
  "$VPY" -m pip install -q tensorboard "$NUMPY"
fi

# The models' data (scikit-learn's digits) and the convergence plots (matplotlib).
if ! "$VPY" -c 'import sklearn, matplotlib' 2>/dev/null; then
  say "installing scikit-learn and matplotlib"
  if [ "$HOROVOD" = 1 ]; then
    "$VPY" -m pip install -q 'scikit-learn<1.6' 'matplotlib<3.10' "$NUMPY"
  else
    "$VPY" -m pip install -q scikit-learn matplotlib "$NUMPY"
  fi
fi

if [ "$HOROVOD" = 1 ] && ! "$VPY" -c 'import horovod.tensorflow' 2>/dev/null; then
  say "building horovod==0.28.1 from source against TF (takes ~3 minutes on 2 cores)"
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
    "$VPY" -m pip install -q --no-build-isolation 'horovod==0.28.1'
fi

if ! "$VPY" -c 'import parallax' 2>/dev/null || parallax_stale; then
  say "installing parallax (editable)"
  "$VPY" -m pip install -q --no-build-isolation --no-deps -e .
  touch "$VENV/.parallax-installed"
fi

if [ "$HOROVOD" = 0 ]; then
  say "ok: $("$VPY" -c 'import tensorflow as tf, numpy; print("tensorflow", tf.__version__, "numpy", numpy.__version__, "(no Horovod: collectives are TF'"'"'s own)")')"
  exit 0
fi

check=$("$VENV/bin/horovodrun" --check-build 2>&1 || true)
for want in TensorFlow MPI; do
  if ! printf '%s\n' "$check" | grep -q "\[X\] $want"; then
    printf '%s\n' "$check"
    say "ERROR: horovodrun --check-build does not list $want. Rebuild: rm -rf .venv && make install"
    exit 1
  fi
done
touch "$VENV/.horovod-checked"
say "ok: $("$VPY" -c 'import tensorflow as tf, horovod; print("tensorflow", tf.__version__, "horovod", horovod.__version__)')"
