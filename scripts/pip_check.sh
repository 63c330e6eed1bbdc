#!/usr/bin/env bash
# `make pip-check`: install parallax as a user would, `pip install ".[tf]"`, into a fresh virtualenv of Python
# 3.13 (PYTHON_VERSION=3.12 ... for another), as an unprivileged user (nobody, when run as root), from the working
# tree's files; then run the LM demo on that install (2 HYBRID workers on localhost against one device with the
# total batch), which fails when the held-out perplexities differ by more than 0.1%. Not part of CI: it downloads
# TensorFlow (about 600 MB). Everything it makes is in one temporary directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYV=${PYTHON_VERSION:-3.13}
STEPS=${STEPS:-300}

find_python() {  # as scripts/install.sh: on PATH if it runs, else pyenv's own build
  if "$1" -c '' 2>/dev/null; then command -v "$1"; return; fi
  ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"${1#python}".*/bin/"$1" 2>/dev/null | sort -V | tail -1
}
PY=$(find_python "python$PYV")
if [ -z "$PY" ]; then echo "[pip-check] no python$PYV here (pyenv install $PYV)" >&2; exit 1; fi

WORK=$(mktemp -d /tmp/parallax-pip-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/src" "$WORK/run"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$WORK/src"  # no build outputs
cp -r models "$WORK/run/models"  # the LM's scripts beside no parallax: the demo imports the installed one
chmod 755 "$WORK"
if [ "$(id -u)" = 0 ]; then
  # Run as root, the user is nobody, who cannot read root's Python (pyenv's lives in /root): a copy of it, as a
  # user's own Python would be.
  cp -a "$(dirname "$(dirname "$PY")")" "$WORK/python"
  PY="$WORK/python/bin/python$PYV"
  export LD_LIBRARY_PATH="$WORK/python/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# A user's environment, not make's: make exports TF_USE_LEGACY_KERAS (empty for TF 2.15) to every recipe.
as_user() {
  if [ "$(id -u)" = 0 ]; then
    chown -R 65534:65534 "$WORK"
    setpriv --reuid=65534 --regid=65534 --clear-groups env -u PYTHONPATH -u TF_USE_LEGACY_KERAS HOME="$WORK" "$@"
  else
    env -u PYTHONPATH -u TF_USE_LEGACY_KERAS HOME="$WORK" "$@"
  fi
}
echo "[pip-check] $("$PY" --version), as $(as_user id -un 2>/dev/null || echo nobody): pip install \".[tf]\""
as_user "$PY" -m venv "$WORK/venv"
as_user "$WORK/venv/bin/python" -m pip install -q --upgrade pip
as_user "$WORK/venv/bin/python" -m pip install -q "$WORK/src[tf]"
cd "$WORK/run"  # not the source tree: `import parallax` must find the installed package
as_user "$WORK/venv/bin/python" - <<'PY'
import os, sys, parallax, tensorflow as tf
from parallax.process import bind_shim
assert "site-packages" in parallax.__file__, parallax.__file__
assert os.access(os.path.join(sys.prefix, "bin", "parallax-launch"), os.X_OK), "no parallax-launch in the venv"
print(f"[pip-check] parallax from {parallax.__file__}, TF {tf.__version__}, shim {bind_shim.preloading_environment()['LD_PRELOAD']}")
PY
as_user env PATH="$WORK/venv/bin:$PATH" "$WORK/venv/bin/python" models/lm/demo.py --steps "$STEPS" \
  --work-dir "$WORK/run/demo" --max-difference 0.1
echo "[pip-check] ok: pip install \".[tf]\" on Python $PYV, a 2-worker HYBRID LM job equals one device"
