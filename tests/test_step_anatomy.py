"""``scripts/step_anatomy.py`` (the host's time per phase of a real fit's step, against the device's kernels) runs a
real fit of the quickstart config and its phases partition each step's wall time."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from helpers.paths import REPO


@pytest.mark.slow
def test_the_phases_of_a_step_add_up_to_its_wall_time():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "step_anatomy.py"), "--config",
                           str(REPO / "configs" / "quickstart.yaml"), "--steps", "8", "--warmup", "2"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    figures = {name: float(value) for name, value in
               re.findall(r"(wall|forward|backward|optimizer|between steps) (\d+\.\d+)", line)}
    phases = ("forward", "backward", "optimizer", "between steps")
    assert set(figures) == {"wall", *phases}, line
    assert all(value > 0 for value in figures.values()), line
    assert sum(figures[p] for p in phases) == pytest.approx(figures["wall"], abs=0.02), line  # rounding only
    assert "device kernels n/a" in line  # no GPU here
