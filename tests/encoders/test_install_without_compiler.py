"""Installing without a C++ compiler still works: the wheel builds (with a warning), lacks the compiled loop, and
the ON-LSTM runs its plain-PyTorch loop; asking for the compiled loop explicitly says why it cannot run."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from helpers.paths import REPO

ROOT = REPO

CHECK = """
import torch
from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks import native
assert not native.available(), "the compiled loop should be absent"
out = ONLSTM(4, 8, 4, num_layers=2, bidirectional=True)(torch.randn(2, 3, 4), torch.tensor([[1, 1, 1], [1, 1, 0]]).bool())
out.hidden.sum().backward()
try:
    ONLSTM(4, 8, 4, backend="compiled")(torch.randn(2, 3, 4))
except ValueError as error:
    print(error)
"""


@pytest.mark.slow
def test_a_wheel_built_without_a_compiler_runs_the_pytorch_loop(tmp_path):
    env = {**os.environ, "CXX": "/bin/false", "CC": "/bin/false"}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                            str(tmp_path), str(ROOT)], env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not any("onlstm_tasks/native/_kernels" in name for name in names)  # the one compiled library
    zipfile.ZipFile(wheel).extractall(tmp_path / "pkg")
    run = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(tmp_path / "pkg")})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "backend 'compiled' cannot run here: the compiled CPU kernels were not built" in run.stdout
