"""Test-suite wiring: with ONLSTM_REQUIRE_SHARED_DATA=1 (set by .ci/run) a skipped shared-data test fails, with
ONLSTM_REQUIRE_COMPILED=1 (also set by .ci/run) a skipped test of the compiled ON-LSTM loop fails, with
ONLSTM_REQUIRE_TRITON=1 (also set by .ci/run) a skipped test of the Triton kernels fails, and with
ONLSTM_REQUIRE_CUDA=1 (set by scripts/gpu_check.sh) a skipped CUDA test fails.

Without an NVIDIA GPU, Triton's kernels run on CPU tensors in its interpreter: ``TRITON_INTERPRET=1`` is set here,
before anything imports Triton (a GPU runs them compiled)."""

from __future__ import annotations

import os

if not os.path.exists("/dev/nvidiactl"):  # no NVIDIA GPU: before torch or Lightning can import Triton
    os.environ.setdefault("TRITON_INTERPRET", "1")

import lightning.pytorch  # noqa: E402,F401 - see below
import pytest  # noqa: E402

# Lightning gives its logger a StreamHandler bound to the sys.stderr of the moment it is first imported. The CLI
# imports Lightning only when a subcommand runs; imported first inside a test that captures stderr, the handler
# would keep that test's (later closed) stream. Importing it here binds the real one.

REQUIRE_SHARED = os.environ.get("ONLSTM_REQUIRE_SHARED_DATA") == "1"
REQUIRE_COMPILED = os.environ.get("ONLSTM_REQUIRE_COMPILED") == "1"
REQUIRE_CUDA = os.environ.get("ONLSTM_REQUIRE_CUDA") == "1"
REQUIRE_TRITON = os.environ.get("ONLSTM_REQUIRE_TRITON") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_SHARED and report.skipped and item.get_closest_marker("shared_data") is not None:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: needs ../shared/data, which ONLSTM_REQUIRE_SHARED_DATA=1 makes required, "
            f"but it was skipped: {report.longrepr}"
        )
    if REQUIRE_COMPILED and report.skipped and item.get_closest_marker("compiled") is not None:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: needs the compiled ON-LSTM loop, which ONLSTM_REQUIRE_COMPILED=1 makes required, "
            f"but it was skipped: {report.longrepr}"
        )
    if REQUIRE_TRITON and report.skipped and item.get_closest_marker("triton") is not None \
            and item.get_closest_marker("cuda") is None:  # (a CUDA test skips for want of a GPU, not of Triton)
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: needs Triton, which ONLSTM_REQUIRE_TRITON=1 makes required: {report.longrepr}"
    if REQUIRE_CUDA and report.skipped and item.get_closest_marker("cuda") is not None:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: needs a GPU, which ONLSTM_REQUIRE_CUDA=1 makes required: {report.longrepr}"


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module's tiny models (``pytestmark = pytest.mark.usefixtures("one_thread")``) or
    one test: on 2 shared cores a second thread only adds synchronisation (and pytorch-crf's max-with-indices, an
    OpenMP region, stalls for milliseconds when another process holds a core)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def plain_argv(monkeypatch):
    """``sys.argv`` of a bare ``onlstm-tasks``: LightningCLI reads it, and pytest's own arguments are not the CLI's."""
    import sys

    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])
