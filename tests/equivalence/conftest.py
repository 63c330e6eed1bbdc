"""`make test` runs these jobs two at a time (pytest-xdist, --dist loadgroup). A case's tests share one group, so
they run in one pytest process and reuse its single-process reference (harness.reference caches per process)."""
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        params = item.callspec.params if hasattr(item, "callspec") else {}
        if "case" in params:
            group = str(params["case"])
        elif "seed" in params:
            group = f"random:{params['seed']}"
        else:
            group = item.module.__name__
        item.add_marker(pytest.mark.xdist_group(group))
