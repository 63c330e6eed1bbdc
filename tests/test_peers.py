"""The peers of benchmarks/peers/ compute what one device computes where benchmarks/results/peers_exactness.md says
they do: the Horovod script (default sparse handling) against train.py with the global batch, for the two models
with embeddings (the LM, whose gradients are clipped after Horovod's averaging, and the recommendation model), in
float64, every variable after a few steps."""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "peers"))
import exactness  # noqa: E402

pytestmark = pytest.mark.slow  # real jobs


@pytest.mark.parametrize("model", ["lm", "recsys"])
def test_the_horovod_peer_computes_one_devices_result(tmp_path, model):
    data = exactness.make_data(model, str(tmp_path))
    args = exactness.argparse.Namespace(steps=3, workers=2, batch_size=16, work=str(tmp_path))
    chosen = {label: (command, launch) for label, command, launch in exactness.runs(model, data, args)}
    for label in ("one device", "Horovod"):
        command, launch = chosen[label]
        launch([*command, "--checkpoint-dir", str(tmp_path / label)], label)
    reference = exactness.checkpoint_variables(str(tmp_path / "one device"))
    horovod = exactness.checkpoint_variables(str(tmp_path / "Horovod"))
    diff, worst, step = exactness.compare(reference, horovod)
    assert step == 3 and diff <= 1e-12, (diff, worst)
