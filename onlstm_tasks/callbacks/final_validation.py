"""``ValidateLastStep``: the training step that ends ``fit`` by ``max_steps`` or ``max_epochs`` is validated.

Lightning validates every ``val_check_interval`` batches and at the step where something set
``trainer.should_stop`` (``max_time``'s Timer, EarlyStopping). A run ended by ``max_steps`` (or by the end of the
last epoch when ``val_check_interval`` does not divide it) stops without validating its last steps: its final
weights are never scored, and a run that stops before its first validation has no ``best.ckpt`` (``test_after_fit``
then tests the final weights, never scored on validation) while ``EarlyStopping`` raises for its missing monitor at
the end of the epoch. This callback marks that last step as a stopping one (``trainer.should_stop``), which makes Lightning
run the validation loop there, so the checkpoint callbacks and ``EarlyStopping`` see a score.

The CLI adds it to every trainer. It changes nothing when validation is off (``limit_val_batches: 0``) or when
the epoch is not a validation epoch (``check_val_every_n_epoch``).
"""

from __future__ import annotations

from lightning.pytorch.callbacks import Callback


class ValidateLastStep(Callback):
    """Sets ``trainer.should_stop`` on the training batch after which ``fit`` ends by ``max_steps`` or
    ``max_epochs``, so Lightning validates it (see the module docstring)."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.sanity_checking or not trainer.enable_validation:
            return
        loop = trainer.fit_loop
        last_step = loop.max_steps not in (None, -1) and trainer.global_step >= loop.max_steps
        last_epoch = (loop.max_epochs not in (None, -1) and trainer.current_epoch + 1 >= loop.max_epochs
                      and loop.epoch_loop.batch_progress.is_last_batch)
        if last_step or last_epoch:
            trainer.should_stop = True
