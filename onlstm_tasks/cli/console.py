"""The ``onlstm-tasks`` console script: ``fit|validate|test|predict`` through LightningCLI
(:mod:`onlstm_tasks.cli.lightning_cli`), ``export`` through the Python API, and a help of its own.

Lightning (with torchmetrics, transformers and matplotlib behind it) takes seconds to import, so this module
imports it only when a subcommand runs: ``onlstm-tasks``, ``--help`` and ``--version`` answer at once.
"""

from __future__ import annotations

import sys

from .. import __version__
from ..errors import debug_requested, find_user_error, report_user_error
from .known_warnings import quiet_known_warnings
from .package_logs import drop_held_logs, release_held_logs, show_package_logs
from ..tasks.registry import TASKS

# the subcommands with what each does here (``onlstm-tasks SUBCOMMAND --help`` lists its options)
SUBCOMMANDS = {
    "fit": "train a model from a YAML config (--config X.yaml); --ckpt_path last resumes an interrupted run",
    "validate": "score a checkpoint (--ckpt_path) on the validation split",
    "test": "score a checkpoint (--ckpt_path) on the test split and print the per-class report",
    "predict": "tag, classify or score new text with a checkpoint (--ckpt_path, --data.init_args.predict_file)",
    "export": "write a checkpoint as a save_pretrained folder, optionally pushed to the Hugging Face Hub",
}

HELP = """usage: onlstm-tasks [--version] [--debug] SUBCOMMAND [--config X.yaml] [options]

ON-LSTM (Ordered Neurons LSTM) encoders for named entity recognition, aspect-level sentiment classification and
language models, trained with PyTorch Lightning on Hugging Face datasets. Every option of a config can be set or
overridden on the command line (--model.init_args.encoder.init_args.hidden_size 256).

subcommands:
{subcommands}

tasks (the model of a config: --model.class_path):
{tasks}

options:
  -h, --help     show this help and exit (SUBCOMMAND --help --config X.yaml: the options of that config's
                 model, encoder and data, with their values and docs; SUBCOMMAND --help-trainer: Lightning's)
  --version      print the version and exit
  --debug        show the traceback of a configuration or data error (ONLSTM_TASKS_DEBUG=1 does the same)

examples:
  onlstm-tasks fit --config configs/quickstart.yaml
  onlstm-tasks fit --config configs/quickstart.yaml --print_config
  onlstm-tasks test --config configs/quickstart.yaml --ckpt_path runs/quickstart/lightning_logs/version_0/checkpoints/best.ckpt
"""


def help_text() -> str:
    width = max(map(len, SUBCOMMANDS))
    tasks = "\n".join(f"  {task.model}\n      {task.summary}" for task in TASKS.values())
    return HELP.format(subcommands="\n".join(f"  {name:<{width}}  {text}" for name, text in SUBCOMMANDS.items()),
                       tasks=tasks)


def main(args: list[str] | None = None) -> None:
    """The console script. The project's own errors (bad data, config, checkpoint, unreachable hub) print one
    line ``error: <file>:<line>: <what> (<what to do>)`` and exit with code 2; ``--debug`` (or
    ``ONLSTM_TASKS_DEBUG=1``) shows their traceback. Any other exception is a bug and keeps its traceback."""
    debug, argv = debug_requested(list(sys.argv[1:] if args is None else args))
    if argv and argv[0] in ("--version", "-V"):
        print(f"onlstm-tasks {__version__}")
        return
    if not argv or argv[0] in ("-h", "--help"):
        print(help_text(), end="")
        if not argv:
            sys.stderr.write("error: a subcommand is required (fit, validate, test, predict or export)\n")
            raise SystemExit(2)
        return
    if argv[0] in SUBCOMMANDS and argv[0] != "export" and {"-h", "--help"} & set(argv) \
            and "--help-trainer" not in argv:  # the config's own options, at once (no Lightning import)
        from .config_help import help_text as config_help

        print(config_help(argv[0], argv), end="")
        return
    argv = [("--help" if arg == "--help-trainer" else arg) for arg in argv]  # Lightning's whole help
    show_package_logs(hold=argv[0] != "export")  # until the inputs are checked: a mistake's line then stands alone
    quiet_known_warnings()
    if args is None:
        sys.argv[1:] = argv  # without --debug; LightningCLI reads sys.argv itself (it warns when given both)
    try:
        if argv[0] == "export":  # a checkpoint as a save_pretrained folder (and Hub push): no LightningCLI
            from ..api.export import main as export_main

            export_main(argv[1:])
            return
        from .lightning_cli import run_cli

        run_cli(None if args is None else argv)
    except KeyboardInterrupt:  # Ctrl-C outside the training loop (Lightning handles it there): one line
        if debug:
            raise
        drop_held_logs()
        sys.stderr.write("interrupted (Ctrl-C); a fit interrupted after its first step resumes with --ckpt_path "
                         "last\n")
        raise SystemExit(130) from None
    except Exception as err:
        user_error = find_user_error(err)
        if user_error is None or debug:
            release_held_logs()
            raise
        drop_held_logs()
        report_user_error(user_error)
    finally:
        release_held_logs()


if __name__ == "__main__":
    main()
