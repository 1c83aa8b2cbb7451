"""The LightningCLI behind ``onlstm-tasks fit|validate|test|predict``: the data facts linked into the model,
one-line configuration errors, checkpoints that supply the vocabularies, and checks made before any data is read.

:mod:`onlstm_tasks.cli` (the console script) imports this module only when a subcommand runs, so ``--help`` and
``--version`` never pay for importing Lightning."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path

import yaml
from jsonargparse import Namespace
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities.exceptions import SIGTERMException

from ..callbacks.final_validation import ValidateLastStep
from ..callbacks.model_summary import summary_for
from ..callbacks.progress_bar import quiet_bar_for
from ..callbacks.resume import resume_from_last
from .config_checks import check_config, check_config_files
from .config_help import DATA_FACTS, config_files, merge
from .config_messages import short_parser_message, short_union_message
from ..data.core.checkpoint_file import read_checkpoint_file
from ..errors import ConfigError, find_user_error
from .package_logs import release_held_logs
from ..tasks.registry import task_named
from ..tasks.loading import task_model_class

log = logging.getLogger(__name__)

# DATA_FACTS (config_help): model hyper-parameters that are facts of the data, linked from the data module (which
# reads them from the checkpoint for validate/test/predict), so never re-parsed from a checkpoint
SUBCOMMAND_STAGES = {"fit": "fit", "validate": "validate", "test": "test", "predict": "predict"}


class TasksArgumentParser(LightningArgumentParser):
    """LightningArgumentParser whose errors are one or two lines (:func:`short_parser_message`), raised as
    :class:`ConfigError` instead of printing the whole usage; ``--help`` shows the usage as before."""

    def error(self, message: str, ex: Exception | None = None):
        if not self.exit_on_error:
            return super().error(message, ex)
        options = [a.dest for a in self._actions if a.dest and a.dest != "help"]
        raise ConfigError(short_parser_message(message, options)) from ex


def _node(config, dotted: str):
    """The value at a dotted key of a config Namespace or dict, passing through ``init_args`` levels; None if absent."""
    node = config
    for part in dotted.split("."):
        if isinstance(node, (dict, Namespace)) and part in node:
            node = node[part]
        else:
            return None
    return node


def dropped_init_args(argv: list[str], config) -> list[str]:
    """Warnings for ``--X.encoder NAME`` overrides that replaced a config file's class and dropped its
    ``init_args`` the new class does not take (jsonargparse drops them silently)."""
    merged: dict = {}
    for file in config_files(argv):
        try:
            loaded = yaml.safe_load(Path(file).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        merge(merged, loaded)
    warnings = []
    for arg in argv:
        if not arg.startswith("--") or arg.startswith("--config"):
            continue
        key = arg[2:].split("=", 1)[0].removesuffix(".class_path")
        before = _node(merged, key)
        after = _node(config, key)
        if not (isinstance(before, dict) and isinstance(after, Namespace) and "class_path" in after):
            continue
        old_args = before.get("init_args") or {}
        new_args = after.get("init_args") or Namespace()
        dropped = [k for k in old_args if k not in new_args]
        if dropped and before.get("class_path") != after.class_path:
            warnings.append(f"--{key}: {after.class_path.rsplit('.', 1)[-1]} replaces "
                            f"{str(before.get('class_path')).rsplit('.', 1)[-1]} and drops its "
                            f"{', '.join(f'{k}={old_args[k]}' for k in dropped)} (it does not take them; set the "
                            f"new class's arguments with --{key}.init_args.KEY)")
    return warnings


class TasksCLI(LightningCLI):
    """LightningCLI plus: vocabularies/labels linked from data to model, ``--test_after_fit``, and checkpoints
    supplying the vocabularies for validate/test/predict (so no training data is needed there)."""

    def add_arguments_to_parser(self, parser) -> None:
        for fact in DATA_FACTS:
            parser.link_arguments(f"data.{fact}", f"model.init_args.{fact}", apply_on="instantiate")
        parser.add_argument("--test_after_fit", type=bool, default=False,
                            help="after fit, run test on the best checkpoint and print the scores")

    def parse_arguments(self, parser, args) -> None:
        super().parse_arguments(parser, args)
        sub = self.config.get("subcommand")
        if sub:  # values, paths and sizes known now fail here, before a checkpoint or any data is read
            check_config(sub, self.config[sub])
        argv = sys.argv[1:] if args is None else args
        if isinstance(argv, list) and sub:
            for warning in dropped_init_args(argv[1:] if argv and argv[0] == sub else argv, self.config[sub]):
                log.warning(warning)

    def instantiate_classes(self) -> None:
        try:
            super().instantiate_classes()
        except (ValueError, RuntimeError, MemoryError) as err:
            if find_user_error(err) is None and (isinstance(err, MemoryError) or "can't allocate memory" in str(err)):
                sub = self.config.get("subcommand")
                option = largest_size(self.config[sub] if sub else self.config)
                raise ConfigError(f"the model does not fit in memory{option}; give smaller sizes") from err
            if not isinstance(err, ValueError) or find_user_error(err) is not None \
                    or "Does not validate against any of the Union" not in str(err):
                raise
            raise ConfigError(f"cannot build the configured classes: {short_union_message(str(err))}") from err

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
        hparams = read_checkpoint_file(ckpt_path).get("hyper_parameters", {})
        hparams.pop("_instantiator", None)
        self._check_task(ckpt_path, hparams, self.config[sub].get("model"))
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

    @staticmethod
    def _check_task(ckpt_path: str, hparams: dict, model) -> None:
        """Refuses a checkpoint of another task than the config's model (one line instead of a failure deep in
        the first batch)."""
        configured = getattr(model, "class_path", None) if model is not None else None
        if not hparams or not configured:
            return
        try:
            saved = task_model_class(hparams)
        except ValueError as err:
            raise ConfigError(f"{ckpt_path}: {err}") from None
        wanted, kind = task_named(configured.rsplit(".", 1)[-1]), task_named(saved.__name__)
        if wanted is not None and kind is not None and kind != wanted:
            raise ConfigError(f"{ckpt_path} is {kind.article} {kind.name} checkpoint; this config trains "
                              f"{wanted.name} models (give a checkpoint of {wanted.class_name}, or the config "
                              f"the checkpoint was trained with)")

    def instantiate_trainer(self, **kwargs):
        """The configured trainer plus :class:`ValidateLastStep` (a run ended by ``max_steps`` validates its last
        step, so it ends with a best checkpoint and ``EarlyStopping`` finds its monitor). Before it, the data the
        subcommand uses is read and checked (a mistake in it leaves no run folder), then the package's held log
        lines are shown."""
        check = getattr(self.datamodule, "check_inputs", None)
        if self.subcommand in SUBCOMMAND_STAGES and callable(check):
            check(SUBCOMMAND_STAGES[self.subcommand], self.model)
            if self.subcommand == "fit" and self.config.fit.get("test_after_fit"):
                self._check_test_split()
        release_held_logs()
        trainer = super().instantiate_trainer(**kwargs)
        if not any(isinstance(c, ValidateLastStep) for c in trainer.callbacks):
            trainer.callbacks.append(ValidateLastStep())
        _quiet_default_callbacks(trainer)
        return trainer

    def _check_test_split(self) -> None:
        """``test_after_fit`` tests on the data's test split: without one, say so now, not after the whole run."""
        splits = getattr(self.datamodule, "splits", None)
        found = splits() if callable(splits) else None
        if found is None or "test" in found:
            return
        path = self.config.fit.data.init_args.get("path")
        raise ConfigError(f"--data.init_args.path {path}: the data has no 'test' split (found {sorted(found)}), which "
                          f"test_after_fit: true tests on; give a folder with a test split, or --test_after_fit "
                          f"false")

    def after_fit(self) -> None:
        if self.config.fit.get("test_after_fit"):
            best = self.trainer.checkpoint_callback.best_model_path if self.trainer.checkpoint_callback else ""
            if not best:
                log.warning("test_after_fit: no best checkpoint (no checkpoint callback, or no validation ran); "
                            "testing the final weights")
            self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best or None)


def largest_size(config) -> str:
    """``: --KEY VALUE is the largest size`` for the largest size option (:data:`config_checks.SIZES`) of the
    model's classes, or ``""``."""
    from .config_checks import SIZES, as_dict
    from .config_help import class_nodes

    sizes = [(value, f"--{key}.init_args.{name}") for key, _path, init_args, _depth
             in class_nodes(as_dict(config).get("model") or {}, "model") for name, value in init_args.items()
             if name in SIZES and isinstance(value, int) and not isinstance(value, bool)]
    if not sizes:
        return ""
    value, option = max(sizes)
    return f": {option} {value} is its largest size"


def _quiet_default_callbacks(trainer) -> None:
    """Lightning's own bars (TQDM's, or Rich's where ``rich`` is installed) become their
    :class:`~onlstm_tasks.callbacks.progress_bar.LoggedStepMetrics` versions, which read no tensor between logging
    steps, and its model summary one without the FLOPs it cannot count here; callbacks of other classes stay."""
    for i, callback in enumerate(trainer.callbacks):
        quiet = quiet_bar_for(callback) or summary_for(callback)
        if quiet is not None:
            trainer.callbacks[i] = quiet


def quiet_datasets_progress() -> None:
    """No "Generating train split" bars from ``datasets`` (the readers log what they read, counted), unless asked
    for with ``HF_DATASETS_DISABLE_PROGRESS_BARS=0``."""
    import os

    if os.environ.get("HF_DATASETS_DISABLE_PROGRESS_BARS") is None:
        import datasets

        datasets.disable_progress_bars()


def run_cli(args: list[str] | None) -> None:
    """Runs ``fit|validate|test|predict`` with ``args`` (None: ``sys.argv``). A run stopped by SIGTERM (after
    :class:`~onlstm_tasks.callbacks.ResumableCheckpoint` wrote ``last.ckpt``) exits as killed by it."""
    check_config_files(sys.argv[1:] if args is None else args)
    quiet_datasets_progress()
    try:
        TasksCLI(
            model_class=None,
            datamodule_class=None,
            subclass_mode_model=True,
            subclass_mode_data=True,
            args=args,
            parser_class=TasksArgumentParser,
            save_config_kwargs={"overwrite": True},
            trainer_defaults={"use_distributed_sampler": False},
        )
    except SIGTERMException:
        raise SystemExit(128 + signal.SIGTERM) from None
