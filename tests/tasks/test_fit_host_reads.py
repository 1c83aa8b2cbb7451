"""A real ``onlstm-tasks fit`` (the Lightning CLI, in this process) reads nothing on the host between two training
batches: not in the step, its backward, the optimiser, the callbacks, logging or the progress bar (Lightning's bars
converted the ``prog_bar`` loss with ``.item()`` at every batch end; the package's bars show it as logged), except
once per ``log_every_n_steps``, where Lightning hands the logged values to the loggers. Counted per step by :class:`helpers.fit_reads.StepHostReads`, for
NER, aspect sentiment and the language model, over a few dozen steps.

The optimiser is fused Adam (as the GPU config's): torch.optim's single-tensor Adam reads its CPU step counters with
``.item()``, which are host tensors on a GPU too (no wait), but which this CPU count cannot tell from a device read.
Reads inside the ON-LSTM operator (the CPU loop plans its runs from the lengths; the Triton back end a GPU runs
reads nothing, tests/encoders/test_onlstm_triton.py) are counted apart and not here."""

from __future__ import annotations

import pytest

from helpers.fit_reads import StepHostReads, pause_during_loader_fetch
from helpers.lm import write_toy_corpus
from helpers.paths import REPO
from onlstm_tasks.cli.lightning_cli import TasksCLI
from onlstm_tasks.sample_data import sample_path

pytestmark = pytest.mark.filterwarnings("ignore")
STEPS = 30
LOG_EVERY = 10


def fit_reads(tmp_path, monkeypatch, config: str, *overrides: str) -> list:
    pause_during_loader_fetch(monkeypatch)
    args = ["fit", "--config", str(REPO / "configs" / config), "--trainer.max_steps", str(STEPS),
            "--trainer.max_epochs", "100", "--trainer.accelerator", "cpu", "--trainer.log_every_n_steps", str(LOG_EVERY),
            "--trainer.default_root_dir", str(tmp_path), "--trainer.logger.init_args.save_dir", str(tmp_path),
            "--trainer.enable_checkpointing", "false", "--trainer.callbacks", "[]",
            "--trainer.callbacks+=helpers.fit_reads.StepHostReads", "--trainer.limit_val_batches", "2",
            "--trainer.enable_model_summary", "false", "--model.init_args.optimizer.init_args.fused", "true",
            *overrides]
    cli = TasksCLI(model_class=None, datamodule_class=None, subclass_mode_model=True, subclass_mode_data=True,
                   args=args, save_config_kwargs={"overwrite": True}, run=True,
                   trainer_defaults={"use_distributed_sampler": False})
    counter = next(c for c in cli.trainer.callbacks if isinstance(c, StepHostReads))
    return counter.steps


def assert_no_reads(steps: list) -> None:
    """No read in a step, except in those whose end the loggers receive (every ``log_every_n_steps``): there
    Lightning converts each logged value for the loggers (the loss; the LM's loss and nll), and the bar reads
    one: at most three reads."""
    assert len(steps) >= STEPS // 2, len(steps)
    reads = [(step, r.total, dict(r.where)) for step, r in steps if r.total]
    assert all((step + 1) % LOG_EVERY == 0 and total <= 3 for step, total, _ in reads), reads
    assert reads, "no logging step was counted"


@pytest.mark.slow
def test_ner_fit_reads_nothing_per_step(tmp_path, monkeypatch):
    assert_no_reads(fit_reads(tmp_path, monkeypatch, "quickstart.yaml", "--test_after_fit", "false"))


@pytest.mark.slow
def test_absa_fit_reads_nothing_per_step(tmp_path, monkeypatch):
    assert_no_reads(fit_reads(
        tmp_path, monkeypatch, "absa/semeval14_restaurants_onlstm_td.yaml", "--data.init_args.path",
        str(sample_path("absa")), "--data.init_args.data_dir", "null", "--data.init_args.revision", "null",
        "--test_after_fit", "false"))


@pytest.mark.slow
def test_lm_fit_reads_nothing_per_step(tmp_path, monkeypatch):
    files = write_toy_corpus(tmp_path / "corpus", {"train": 400, "validation": 20, "test": 20})
    assert_no_reads(fit_reads(
        tmp_path, monkeypatch, "lm/unlabelled_en_onlstm_bi.yaml", "--data.init_args.data_files",
        str(files).replace("'", '"'), "--data.init_args.batch_size", "8", "--test_after_fit", "false"))
