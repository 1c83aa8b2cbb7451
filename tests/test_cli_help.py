"""``onlstm-tasks --help`` (issue 34): every subcommand with a description of this project, printed without
importing Lightning; the help texts of ``export`` and ``onlstm-trees`` in plain text (no RST markup)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from onlstm_tasks.cli import SUBCOMMANDS, main
from onlstm_tasks.lightning_cli import TasksCLI


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
