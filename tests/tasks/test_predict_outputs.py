"""``predict`` writes where the run lives and leaves no trace in the logger's version folders."""

from __future__ import annotations

import json

import yaml

from helpers.cli import tiny_ner_config


def test_predict_writes_under_default_root_dir_and_creates_no_version_folder(tmp_path):
    from onlstm_tasks.cli import main

    config = tiny_ner_config(tmp_path, max_epochs=1, limit_train_batches=2, limit_val_batches=1)
    settings = yaml.safe_load(config.read_text())
    settings["trainer"]["callbacks"][1]["init_args"] = {}  # the writer's default output
    config.write_text(yaml.safe_dump(settings))
    main(["fit", "--config", str(config)])
    versions = sorted(p.name for p in (tmp_path / "logs").iterdir())

    text = tmp_path / "input.txt"
    text.write_text("Anna Smith lives in Paris .\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    main(["predict", "--config", str(config), "--ckpt_path", str(tmp_path / "ckpt" / "best.ckpt"),
          "--trainer.default_root_dir", str(elsewhere), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(text)])
    rows = [json.loads(line) for line in (elsewhere / "predictions.jsonl").read_text().splitlines()]
    assert [r["tokens"] for r in rows] == [["Anna", "Smith", "lives", "in", "Paris", "."]]
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == versions == ["version_0"]
    assert not (tmp_path / "predictions.jsonl").exists()
