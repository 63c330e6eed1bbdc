"""A value only the chief computes (the global norm of aggregated gradients that include server-held rows), read
by work every worker does (its own local variable's write): the chief sends it to every worker through a queue per
worker on the coordinator (sync_passes._send_to_every_worker). PS mode, which has no collectives, refused such a
step before; every worker's variable now holds one device's value, step by step."""
import json
import re

import pytest

from tests.launched import script_output

pytestmark = pytest.mark.slow  # real jobs


@pytest.mark.parametrize("mode", ["PS", "HYBRID"])
def test_every_workers_own_state_written_from_the_chiefs_value_is_one_devices(mode):
    output = script_output("chief_values.py", [mode], timeout=240)
    expected = json.loads(re.search(r"one device norms (\[.*\])", output).group(1))
    found = dict(re.findall(r"worker (\d) norms (\[.*\])", output))
    assert sorted(found) == ["0", "1"], output[-3000:]
    assert len(expected) == 4 and len(set(expected)) == 4  # a changing value, clipped (the norm exceeds 0.05)
    for worker, norms in found.items():
        assert max(abs(a - b) for a, b in zip(json.loads(norms), expected)) <= 1e-9, (worker, norms, expected)
    assert float(re.search(r"max diff (\S+)", output).group(1)) <= 1e-9
