"""A short real ``onlstm-tasks fit`` in this process with one more callback, for the scripts that watch a fit's steps
(``fit_sync_check.py``, ``step_anatomy.py``)."""

from __future__ import annotations

import tempfile

from onlstm_tasks.cli.lightning_cli import TasksCLI


def short_fit(config: str, steps: int, callback, extra: list[str]) -> None:
    """``config`` trained for ``steps`` steps through the Lightning CLI with ``callback`` added to the trainer's
    (which the run's own callbacks replace: none), validation, checkpoints and the test after fit off, into a
    temporary folder; ``extra``: more CLI arguments."""

    class CLI(TasksCLI):
        def instantiate_trainer(self, **kwargs):
            trainer = super().instantiate_trainer(**kwargs)
            trainer.callbacks.append(callback)
            return trainer

    with tempfile.TemporaryDirectory() as root:
        CLI(model_class=None, datamodule_class=None, subclass_mode_model=True, subclass_mode_data=True,
            args=["fit", "--config", config, "--trainer.max_steps", str(steps), "--trainer.max_epochs", "1000",
                  "--trainer.limit_val_batches", "0", "--trainer.enable_checkpointing", "false",
                  "--trainer.callbacks", "[]", "--trainer.default_root_dir", root,
                  "--trainer.logger.init_args.save_dir", root, "--test_after_fit", "false", *extra],
            save_config_kwargs={"overwrite": True}, trainer_defaults={"use_distributed_sampler": False})
