"""``scripts/benchmark_training.py --loader-only`` on the kit: the loader's speed, what a batch costs the training
process built in it against received from loader processes, and the distinct batch shapes per config."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from helpers.shared_data import REPO_ROOT, SHARED_DATA, requires_shared_data


@pytest.mark.slow
@requires_shared_data
def test_the_loader_lines():
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "benchmark_training.py"), "--loader-only",
                           "--data", str(SHARED_DATA / "conll2012_ontonotesv5")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"0 workers, 1 thread: one training epoch \(\d+ tokens\) in [\d.]+ s = [\d,]+ tokens/s", out), out
    cost = re.search(r"CPU time per batch: ([\d.]+) ms building it, ([\d.]+) ms receiving it", out)
    assert cost and float(cost[1]) > 0 and float(cost[2]) > 0, out
    assert re.findall(r"distinct batch shapes in one training epoch, (\S+): \d+", out) == ["ON-LSTM-CRF", "LSTM-CRF"]
