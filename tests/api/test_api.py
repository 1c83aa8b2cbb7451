"""The Python API (``onlstm_tasks.load``), ``save_pretrained``/``from_pretrained``/``push_to_hub`` and
``onlstm-tasks export`` (issue 20): identical records to ``onlstm-tasks predict``, bit-identical round trips, no
pickle and no network for folders, clear errors for corrupted or foreign folders, the uploaded file list."""

from __future__ import annotations

import functools
import json
import pickle
import re
import shutil
from pathlib import Path

import pytest
import torch

from helpers.paths import FIXTURES as FIXTURE_ROOT
from helpers.cli import REPO, run_cli, tiny_ner_config
from onlstm_tasks.api import AspectClassifier, LanguageModelPredictor, Tagger, export, load
from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks import hub
from onlstm_tasks.tasks.hub import PretrainedFormatError, build_task_model
from onlstm_tasks.tasks.language_model import LanguageModel
from onlstm_tasks.tasks.loading import load_pretrained, load_task_model, read_checkpoint
from onlstm_tasks.tasks.ner import NERTagger

FIXTURES = FIXTURE_ROOT / "pre_move_checkpoints"
NER, ABSA = FIXTURES / "ner_onlstm.ckpt", FIXTURES / "absa_tree_induced.ckpt"
SENTENCES = ["John Smith visited the Acme Corporation in Paris.", "Maria works for Globex in Berlin last May.",
             "Hello"]
ASPECTS = [json.loads(line) for line in (FIXTURES / "aspects.jsonl").read_text().splitlines()]
LM_SENTENCES = ["the cat sat on the mat .", "the mat sat ."]


def tiny_lm() -> LanguageModel:
    torch.manual_seed(0)
    encoder = {"class_path": "onlstm_tasks.encoders.ONLSTM",
               "init_args": {"hidden_size": [16, 16], "chunk_size": 4, "num_layers": 2}}
    words = ["<pad>", "<unk>", "<eos>", "the", "cat", "sat", "on", "mat", "."]
    return build_task_model(LanguageModel, {"embedding_dim": 16, "encoder": encoder},
                            {"word_vocab": words, "char_vocab": ["<pad>", "<unk>"]}).eval()


def save_lm_checkpoint(path: Path) -> Path:
    """A Lightning-style checkpoint of :func:`tiny_lm` (hyper-parameters + weights, as ``fit`` writes them)."""
    model = tiny_lm()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams),
                "pytorch-lightning_version": "2.6.6"}, path)
    return path


def data_of(ckpt: Path) -> dict:
    return read_checkpoint(ckpt)["datamodule_hyper_parameters"]


# ---- CLI predict and Python give identical records ---------------------------------------------------------------
@pytest.mark.slow
def test_cli_predict_and_python_give_identical_records(tmp_path):
    lines = [" ".join(line.split()[0] for line in block.splitlines())
             for block in (sample_path("ner") / "test.txt").read_text().strip().split("\n\n")][:20]
    inputs = tmp_path / "input.txt"
    inputs.write_text("\n".join(lines) + "\n")
    config = tiny_ner_config(tmp_path)
    proc = run_cli("predict", "--config", str(config), "--ckpt_path", str(NER), "--data.init_args.path", "null",
                   "--data.init_args.predict_file", str(inputs))
    assert proc.returncode == 0, proc.stderr[-3000:]
    cli = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert load(NER)(lines) == cli
    assert len(cli) == 20 and any(record["entities"] for record in cli)


def test_empty_lines_give_one_empty_record_each_in_the_cli_and_in_python(tmp_path):
    """One record per input line, an empty line too (issue 34): the CLI's records equal the API's, in order."""
    from onlstm_tasks.cli import main

    lines = [SENTENCES[0], "", "   ", SENTENCES[1], ""]
    inputs = tmp_path / "input.txt"
    inputs.write_text("\n".join(lines) + "\n")
    config = tiny_ner_config(tmp_path)
    main(["predict", "--config", str(config), "--ckpt_path", str(NER), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(inputs)])
    cli = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(cli) == len(lines) and [r["text"] for r in cli] == lines
    assert [bool(r.get("empty")) for r in cli] == [False, True, True, False, True]
    assert cli[1] == {"text": "", "tokens": [], "tags": [], "entities": [], "empty": True}
    assert load(NER)(lines) == cli
    assert load(NER)("") == cli[1]


def test_a_loaded_predictor_saves_and_shares_itself(tmp_path, monkeypatch):
    tagger = load(NER)
    tagger.save_pretrained(tmp_path / "folder")
    assert load(tmp_path / "folder")(SENTENCES) == tagger(SENTENCES)
    pushed = {}
    monkeypatch.setattr(type(tagger.model), "push_to_hub", lambda self, repo_id, **kw: pushed.update(repo=repo_id,
                                                                                                    **kw) or "url")
    assert tagger.push_to_hub("me/tagger", private=True) == "url"
    assert pushed == {"repo": "me/tagger", "private": True}


def test_records_match_the_fixture_predictions():
    """The fixtures' JSONL came from ``onlstm-tasks predict`` (pretokenized NER input, aspect JSON lines)."""
    tokens = [line.split() for line in (FIXTURES / "sentences.txt").read_text().splitlines()]
    expected = [json.loads(line) for line in (FIXTURES / "ner_onlstm.predictions.jsonl").read_text().splitlines()]
    assert load(NER)(tokens, pretokenized=True) == expected
    expected = [json.loads(line) for line in (FIXTURES / "absa_tree_induced.predictions.jsonl").read_text().splitlines()]
    got = load(ABSA).predict(ASPECTS)
    for new, old in zip(got, expected, strict=True):
        assert new.pop("probabilities") == pytest.approx(old.pop("probabilities"), abs=1e-5)
        assert new == old


def test_predictor_inputs():
    tagger = load(NER)
    assert isinstance(tagger, Tagger)
    one = tagger(SENTENCES[0])
    assert isinstance(one, dict) and one["text"] == SENTENCES[0]
    for entity in one["entities"]:
        assert one["text"][entity["char_start"]:entity["char_end"]] == entity["text"]
        assert one["tokens"][entity["start"]:entity["end"]] == entity["tokens"]
    assert tagger(SENTENCES, batch_size=1) == tagger(SENTENCES, batch_size=64) == [tagger(s) for s in SENTENCES]
    assert tagger(["John", "Smith"], pretokenized=True)["tokens"] == ["John", "Smith"]
    with pytest.raises(ValueError, match="input 1: expected a list of non-empty tokens"):
        tagger([["John Smith"]], pretokenized=True)
    clf = load(ABSA)
    assert isinstance(clf, AspectClassifier)
    record = clf("The battery life is great.", aspect="battery life")
    assert record["polarity"] in record["probabilities"] and record["char_span"] == [4, 16]
    assert sum(record["probabilities"].values()) == pytest.approx(1, abs=1e-4)
    with pytest.raises(ValueError, match="occurrence 1"):
        clf("The screen is dim.", aspect="screen", ordinal=1)


# ---- save_pretrained / from_pretrained ---------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["ner", "absa", "lm"])
def test_round_trip_is_bit_identical(tmp_path, task):
    if task == "lm":
        model, data, inputs = tiny_lm(), None, LM_SENTENCES
        run = lambda predictor: predictor.trees(inputs)  # noqa: E731
    else:
        ckpt = NER if task == "ner" else ABSA
        model, data = load_task_model(ckpt), data_of(ckpt)  # Lightning's own loading of the checkpoint
        run = (lambda p: p(SENTENCES)) if task == "ner" else (lambda p: p.predict(ASPECTS))
    before = run(predictor_for_model(model, data))
    folder = tmp_path / "folder"
    load(ckpt).model.save_pretrained(folder) if task != "lm" else model.save_pretrained(folder)
    loaded = type(model).from_pretrained(folder)
    assert loaded.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    after = run(load(folder))
    assert after == before
    if task == "lm":
        assert isinstance(load(folder), LanguageModelPredictor)
        assert [len(after[0][key]) for key in ("tokens", "heads", "distances")] == [7, 7, 7] and after[0]["tree"]
    loaded.save_pretrained(tmp_path / "again")  # a loaded model saves again, the same config
    assert json.loads((tmp_path / "again" / "config.json").read_text()) == \
        json.loads((folder / "config.json").read_text())


def predictor_for_model(model, data):
    return {"NERTagger": Tagger, "AspectSentimentClassifier": AspectClassifier,
            "LanguageModel": LanguageModelPredictor}[type(model).__name__](model, data)


def test_export_folder_loads_offline_without_pickle(tmp_path, monkeypatch):
    folder = tmp_path / "ner"
    export(NER, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "char_vocab.json", "config.json",
                                                         "labels.json", "model.safetensors", "word_vocab.json"]
    card = (folder / "README.md").read_text()
    assert "license: mit" in card and "val_f1" in card and "onlstm-tasks fit --config" in card
    expected = load(NER)(SENTENCES)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def forbidden(*args, **kwargs):
        raise AssertionError("a folder load must not unpickle or use the network")

    for target, name in ((torch, "load"), (pickle, "load"), (pickle, "loads"), (pickle, "Unpickler")):
        monkeypatch.setattr(target, name, forbidden)
    monkeypatch.setattr("onlstm_tasks.api.loading.snapshot_download", forbidden)
    monkeypatch.setattr(hub, "snapshot_download", forbidden)
    assert load(folder)(SENTENCES) == expected


def test_hub_repo_id_is_downloaded_with_snapshot_download(tmp_path, monkeypatch):
    export(NER, tmp_path / "ner")
    calls = []

    def fake_snapshot_download(repo_id, revision=None, **kwargs):
        calls.append((repo_id, revision))
        return str(tmp_path / "ner")

    monkeypatch.setattr("onlstm_tasks.api.loading.snapshot_download", fake_snapshot_download)
    assert isinstance(load("someone/tiny-ner", revision="v1"), Tagger)
    assert calls == [("someone/tiny-ner", "v1")]


def test_corrupted_weights_give_a_clear_error_and_build_nothing(tmp_path, monkeypatch):
    export(NER, tmp_path / "ner")
    (tmp_path / "ner" / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{not json")
    monkeypatch.setattr(hub, "build_task_model", lambda *a, **k: pytest.fail("built a model from a bad folder"))
    with pytest.raises(PretrainedFormatError, match=r"model.safetensors: not a readable safetensors file") as err:
        load(tmp_path / "ner")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("where", ["top", "nested"])
def test_foreign_class_path_gives_a_clear_error_and_imports_nothing(tmp_path, monkeypatch, where):
    export(NER, tmp_path / "ner")
    path = tmp_path / "ner" / "config.json"
    config = json.loads(path.read_text())
    if where == "top":
        config["class_path"] = "os.system"
    else:
        config["init_args"]["encoder"]["class_path"] = "subprocess.Popen"
    path.write_text(json.dumps(config))
    monkeypatch.setattr(hub, "build_task_model", lambda *a, **k: pytest.fail("built a model from a bad folder"))
    with pytest.raises(PretrainedFormatError, match=r"config.json: names the class '(os.system|subprocess.Popen)'") \
            as err:
        load(tmp_path / "ner")
    assert "\n" not in str(err.value) and "nothing was run" in str(err.value)


def test_python_objects_in_init_args_cannot_be_saved(tmp_path):
    model = NERTagger(["<pad>", "<unk>", "a"], ["<pad>", "<unk>", "a"], ["O", "B-X", "I-X"],
                      encoder=functools.partial(ONLSTM, hidden_size=8, chunk_size=4))  # built in Python
    with pytest.raises(ValueError, match=r"init argument '\w+' is a Python object"):
        model.save_pretrained(tmp_path / "x")
    load_task_model(NER).save_pretrained(tmp_path / "y")  # a CLI checkpoint loads with plain init args: it saves


# ---- push_to_hub and the export command ----------------------------------------------------------------------
def test_push_to_hub_uploads_exactly_the_folder(tmp_path, monkeypatch):
    from huggingface_hub import HfApi

    uploads = []

    class Repo:
        repo_id = "someone/tiny-ner"

    def upload_folder(self, *, repo_id, folder_path, **kwargs):
        uploads.append((repo_id, sorted(p.name for p in Path(folder_path).iterdir()),
                        (Path(folder_path) / "model.safetensors").read_bytes()))
        return "https://huggingface.co/someone/tiny-ner/commit/0"

    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kwargs: Repo())
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    url = export(NER, tmp_path / "out", push_to_hub="someone/tiny-ner")
    assert url.endswith("/commit/0")
    (repo_id, files, weights), = uploads
    assert repo_id == "someone/tiny-ner"
    assert files == sorted(p.name for p in (tmp_path / "out").iterdir())
    assert weights == (tmp_path / "out" / "model.safetensors").read_bytes()


def test_export_subcommand(tmp_path, capsys):
    from onlstm_tasks.cli import main

    main(["export", "--ckpt_path", str(NER), "--out", str(tmp_path / "out")])
    assert "wrote" in capsys.readouterr().out
    assert isinstance(load_pretrained(tmp_path / "out"), torch.nn.Module)
    with pytest.raises(SystemExit):
        main(["export", "--ckpt_path", str(tmp_path / "missing.ckpt"), "--out", str(tmp_path / "o")])


def test_export_refuses_a_folder_that_holds_files_unless_overwrite(tmp_path, capsys):
    """A folder with another model's export is not overwritten without a word; ``--overwrite`` replaces it. A
    checkpoint path that is a folder says so. Every file of the export has the same permissions."""
    from onlstm_tasks.cli import main

    out = tmp_path / "out"
    main(["export", "--ckpt_path", str(NER), "--out", str(out)])
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert len(set(modes.values())) == 1, modes
    before = (out / "config.json").read_bytes()
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        main(["export", "--ckpt_path", str(NER), "--out", str(out)])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "holds" in err and "--overwrite" in err and "Traceback" not in err
    assert (out / "config.json").read_bytes() == before
    main(["export", "--ckpt_path", str(NER), "--out", str(out), "--overwrite"])
    with pytest.raises(SystemExit):
        main(["export", "--ckpt_path", str(tmp_path), "--out", str(tmp_path / "other")])
    assert "is a folder, not a file" in capsys.readouterr().err


# ---- README ------------------------------------------------------------------------------------------------------
def test_readme_python_api_runs_as_written(tmp_path, monkeypatch):
    """Runs the ```python blocks of README's "Python API" section in a folder holding the files they name (tiny
    models on the bundled samples), at the paths where the named configs' own ``fit`` writes its first run's
    best checkpoint (the logger's ``save_dir``/``name``/``version_0``/``checkpoints``)."""
    import yaml

    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Python API", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks
    configs = {"configs/quickstart.yaml": NER, "configs/absa/semeval14_laptops_onlstm_td.yaml": ABSA,
               "configs/lm/unlabelled_en_onlstm_bi.yaml": None}
    written = []
    for config, ckpt in configs.items():
        logger = yaml.safe_load((REPO / config).read_text())["trainer"]["logger"]["init_args"]
        path = Path(logger["save_dir"]) / logger.get("name", "lightning_logs") / "version_0" / "checkpoints" / "best.ckpt"
        (tmp_path / path).parent.mkdir(parents=True)
        shutil.copy(ckpt, tmp_path / path) if ckpt else save_lm_checkpoint(tmp_path / path)
        written.append(str(path))
    assert sorted(re.findall(r'load\("(runs/[^"]+)"\)', section)) == sorted(written)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md (Python API)", "exec"), namespace)
