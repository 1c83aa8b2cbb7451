"""``onlstm-tasks --help`` (issue 34): every subcommand with a description of this project, printed without
importing Lightning; the help texts of ``export`` and ``onlstm-trees`` in plain text (no RST markup)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.paths import REPO
from onlstm_tasks.cli import SUBCOMMANDS, main
from onlstm_tasks.cli.lightning_cli import TasksCLI


def test_help_lists_every_subcommand_with_its_description(capsys):
    main(["--help"])
    out = capsys.readouterr().out
    assert set(SUBCOMMANDS) == {*TasksCLI.subcommands(), "export"}
    for name, text in SUBCOMMANDS.items():
        assert f"  {name}" in out and text in out
    assert "``" not in out and "Lightning Trainer command line tool" not in out


def test_no_subcommand_prints_the_help_and_fails(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "subcommands:" in captured.out and "a subcommand is required" in captured.err


def test_help_imports_no_lightning():
    code = ("import sys\nfrom onlstm_tasks.cli import main\nmain(['--help'])\n"
            "assert not [m for m in sys.modules if m.startswith(('lightning', 'torch', 'datasets'))], 'heavy import'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("argv", [["export", "--help"]])
def test_export_help_is_plain_text(capsys, argv):
    with pytest.raises(SystemExit):
        main(argv)
    out = capsys.readouterr().out
    assert "``" not in out and "save_pretrained folder" in out


def test_trees_help_is_plain_text(capsys):
    from onlstm_tasks.probing.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "onlstm-trees" in out


# ---- issue 42: fit --help lists what a user sets ------------------------------------------------------------------
QUICKSTART = str(REPO / "configs" / "quickstart.yaml")
CONFIGS = sorted((REPO / "configs").glob("**/*.yaml"))


def test_fit_help_with_a_config_lists_the_encoder_options_with_values_and_docs(capsys):
    main(["fit", "--help", "--config", QUICKSTART])
    lines = capsys.readouterr().out.splitlines()
    hidden = next(line for line in lines if "--model.init_args.encoder.init_args.hidden_size" in line)
    chunk = next(line for line in lines if "--model.init_args.encoder.init_args.chunk_size" in line)
    assert hidden.split()[1] == "64" and "neurons per direction" in hidden
    assert chunk.split()[1] == "8" and "master-gate level" in chunk
    assert any("--data.init_args.batch_size" in line and line.split()[1] == "16" for line in lines)
    assert not any("--trainer.accumulate_grad_batches" in line for line in lines)  # Lightning's only on request


def test_fit_help_imports_neither_torch_nor_lightning():
    code = ("import sys\nfrom onlstm_tasks.cli import main\n"
            f"main(['fit', '--help', '--config', {QUICKSTART!r}])\n"
            "assert not [m for m in sys.modules if m.startswith(('lightning', 'torch', 'datasets'))], 'heavy import'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hidden_size" in proc.stdout


def test_fit_help_without_a_config_says_how_to_see_the_options(capsys):
    main(["fit", "--help"])
    out = capsys.readouterr().out
    assert "--help --config X.yaml" in out and "--help-trainer" in out


def test_help_trainer_is_lightnings_whole_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--help-trainer"])
    assert exit_info.value.code == 0
    assert "--trainer.accumulate_grad_batches" in capsys.readouterr().out


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c.relative_to(c.parents[1])) for c in CONFIGS])
def test_every_shipped_config_has_a_help_whose_package_classes_are_all_found(config):
    """Every class of the package a shipped config names is found in the source (re-exports and base classes
    followed), so its options are listed."""
    import yaml

    from onlstm_tasks.cli.config_help import class_nodes, find_class, help_text

    for _key, class_path, _init, _depth in class_nodes(yaml.safe_load(config.read_text()), ""):
        if class_path.startswith("onlstm_tasks."):
            assert find_class(class_path) is not None, class_path
    assert "--trainer." in help_text("fit", ["--config", str(config)])


@pytest.mark.parametrize("class_path", [
    "onlstm_tasks.tasks.ner.NERTagger", "onlstm_tasks.tasks.absa.AspectSentimentClassifier",
    "onlstm_tasks.tasks.language_model.LanguageModel", "onlstm_tasks.embedders.word_char.WordCharEmbedder",
    "onlstm_tasks.encoders.ONLSTM", "onlstm_tasks.data.ner.NERDataModule",
    "onlstm_tasks.data.absa.AspectSentimentDataModule", "onlstm_tasks.data.lm.LanguageModelDataModule"])
def test_every_option_a_user_sets_has_a_description_of_its_own(class_path):
    """``fit --help --config`` shows each option's own description: none missing, none copied from a neighbour
    (a docstring line ``a, b: ...`` used to give both the same text). The data facts the CLI links are left out."""
    from collections import Counter

    from onlstm_tasks.cli.config_help import DATA_FACTS, arguments

    shown = [a for a in arguments(class_path) if a.name not in DATA_FACTS]
    assert not [a.name for a in shown if not a.doc]
    counts = Counter(a.doc for a in shown)
    assert not [a.name for a in shown if counts[a.doc] > 1]
