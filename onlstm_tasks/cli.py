"""The ``onlstm-tasks`` console script: LightningCLI with the data facts linked into the model."""

from __future__ import annotations

import logging
import sys

from pathlib import Path

import torch
from lightning.pytorch.cli import LightningCLI

from . import __version__
from .callbacks.resume import resume_from_last

# model hyper-parameters that are facts of the data: linked from the data module (which reads them from the
# checkpoint for validate/test/predict), so never re-parsed from a checkpoint
DATA_FACTS = ("word_vocab", "char_vocab", "labels")


class TasksCLI(LightningCLI):
    """LightningCLI plus: vocabularies/labels linked from data to model, ``--test_after_fit``, and checkpoints
    supplying the vocabularies for validate/test/predict (so no training data is needed there)."""

    def add_arguments_to_parser(self, parser) -> None:
        for fact in DATA_FACTS:
            parser.link_arguments(f"data.{fact}", f"model.init_args.{fact}", apply_on="instantiate")
        parser.add_argument("--test_after_fit", type=bool, default=False,
                            help="after fit, run test on the best checkpoint and print the scores")

    def before_instantiate_classes(self) -> None:
        sub = self.config.get("subcommand")
        if sub == "fit":
            resume_from_last(self.config.fit)  # --ckpt_path last: the newest last.ckpt of the run, same folder
        if sub == "predict":  # predict logs no metrics: no logger, so no empty version_N folder, no saved config
            self.config.predict.trainer.logger = False
            self.save_config_callback = None
        if sub in ("validate", "test", "predict"):
            cfg = self.config[sub]
            ckpt = cfg.get("ckpt_path")
            if ckpt and not cfg.data.init_args.get("vocab_from"):
                cfg.data.init_args.vocab_from = ckpt

    def _parse_ckpt_path(self) -> None:
        """LightningCLI's restoring of the model's configuration from ``--ckpt_path``, minus :data:`DATA_FACTS`.

        LightningCLI re-parses every saved hyper-parameter through jsonargparse; type-checking a vocabulary of a
        few thousand words that way took minutes per ``test``/``predict`` call. The facts are linked from the data
        module, which takes them from the same checkpoint (``vocab_from``), so dropping them here changes nothing
        else. Everything else (embedder, encoder, optimiser, ...) is restored as LightningCLI does it.
        """
        sub = self.config.get("subcommand")
        ckpt_path = self.config[sub].get("ckpt_path") if sub else None
        if not ckpt_path or not Path(ckpt_path).is_file():
            return
        hparams = torch.load(ckpt_path, weights_only=True, map_location="cpu").get("hyper_parameters", {})
        hparams.pop("_instantiator", None)
        for fact in DATA_FACTS:
            hparams.pop(fact, None)
        if "_class_path" in hparams:
            hparams = {"class_path": hparams.pop("_class_path"), "dict_kwargs": hparams}
        if hparams:
            try:
                self.config = self.parser.parse_object({sub: {"model": hparams}}, self.config)
            except SystemExit:
                sys.stderr.write("Parsing of ckpt_path hyperparameters failed!\n")
                raise

    def after_fit(self) -> None:
        if self.config.fit.get("test_after_fit"):
            best = self.trainer.checkpoint_callback.best_model_path if self.trainer.checkpoint_callback else ""
            self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best or None)


def show_package_logs() -> None:
    """Shows this package's INFO lines (counts of what readers skipped or repaired, vocabulary sizes, vector
    coverage, ...) on stderr, as Lightning shows its own; a library import configures nothing by itself."""
    logger = logging.getLogger("onlstm_tasks")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def main(args: list[str] | None = None) -> None:
    show_package_logs()
    argv = sys.argv[1:] if args is None else args
    if argv and argv[0] in ("--version", "-V"):
        print(f"onlstm-tasks {__version__}")
        return
    TasksCLI(
        model_class=None,
        datamodule_class=None,
        subclass_mode_model=True,
        subclass_mode_data=True,
        args=args,
        save_config_kwargs={"overwrite": True},
        trainer_defaults={"use_distributed_sampler": False},
    )


if __name__ == "__main__":
    main()
