"""models/recsys's make_data.py and recsys.py as modules of a test: loaded by path under names of their own, since
the LM's and the NMT's make_data.py are imported as `make_data` too (tests/model_scripts/test_data_generators.py)."""
import importlib.util
import os
import sys

MODELS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "models"))


def recsys_modules():
    """(make_data, recsys), each loaded once per process."""
    if MODELS not in sys.path:
        sys.path.append(MODELS)  # recsys.py imports models/training.py
    loaded = []
    for name in ("make_data", "recsys"):
        key = f"parallax_models_recsys_{name}"
        if key not in sys.modules:
            spec = importlib.util.spec_from_file_location(key, os.path.join(MODELS, "recsys", f"{name}.py"))
            sys.modules[key] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(sys.modules[key])
        loaded.append(sys.modules[key])
    return loaded
