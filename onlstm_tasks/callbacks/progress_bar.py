"""Progress bars that never wait on the device: Lightning's bars convert every ``prog_bar`` metric to a Python
number at every batch end (a host read, which on a GPU waits for the step's kernels). The task models log their
training loss for the loggers only; these bars show it as the loggers received it, read once per
``log_every_n_steps``, and leave out ``v_num`` (the run's version, which the folder's name already says)."""

from __future__ import annotations

from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar

STEP_METRICS = ("train_nll", "train_loss")  # the first of these that a model logs is shown, as last logged


class LoggedStepMetrics:
    """Mixed into a Lightning progress bar: the value of the first of :data:`STEP_METRICS` the model logs, at the
    steps the loggers receive (every ``log_every_n_steps``), read from the device there only (one read), never at
    other batch ends."""

    def _read_new_values(self, trainer) -> None:
        if not trainer._logger_connector.should_update_logs:  # Lightning's own test of a logging step
            return
        shown = self.__dict__.setdefault("_step_metric_values", {})
        metrics = trainer.callback_metrics
        name = next((name for name in STEP_METRICS if name in metrics), None)
        if name is not None:
            shown[name] = float(metrics[name])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._read_new_values(trainer)
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def get_metrics(self, trainer, pl_module) -> dict:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        return {**metrics, **self.__dict__.get("_step_metric_values", {})}


class LoggedStepMetricsBar(LoggedStepMetrics, TQDMProgressBar):
    """``TQDMProgressBar`` with :class:`LoggedStepMetrics`."""


class LoggedStepMetricsRichBar(LoggedStepMetrics, RichProgressBar):
    """``RichProgressBar`` (Lightning's default where ``rich`` is installed) with :class:`LoggedStepMetrics`; a run
    without an epoch limit (``max_epochs: -1``, by steps) shows ``Epoch N``, not Lightning's ``Epoch N/-2``."""

    def _get_train_description(self, current_epoch: int) -> str:
        limit = self.trainer.max_epochs
        description = f"Epoch {current_epoch}" + (f"/{limit - 1}" if limit is not None and limit > 0 else "")
        return f"{description:{len(self.validation_description)}}"


QUIET = {TQDMProgressBar: LoggedStepMetricsBar, RichProgressBar: LoggedStepMetricsRichBar}


def quiet_bar_for(bar):
    """The quiet bar that stands in for one of Lightning's own bars (``bar`` of exactly that class), with its
    settings and state; None for any other bar (one a config chose stays)."""
    quiet = QUIET.get(type(bar))
    if quiet is None:
        return None
    new = quiet.__new__(quiet)
    new.__dict__.update(bar.__dict__)
    return new
