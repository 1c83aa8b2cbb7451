"""Every YAML under ``configs/`` builds and trains: the CLI instantiates its model and data module (every
``class_path`` it names, callbacks and logger included) and runs one training step and one validation step.

``--print_config`` (tests/cli/test_configs.py) builds nothing, so a broken ``class_path`` would pass there; here it
fails. What is changed in a copy of each config, and nothing else:

* sizes, so that each config runs in about a second: every ``hidden_size``, ``word_dim``, ``char_dim``,
  ``char_features``, ``embedding_dim`` and ``attention_size`` is mapped by one function of its value (so sizes that
  must agree, such as a tied language model's last layer and its word vectors, still agree), every
  ``chunk_size`` becomes 2 and the adaptive softmax's ``adaptive_cutoffs`` become 4, 8, ... (below the toy
  vocabulary);
* data: hub datasets and the kit's folders point at local copies (``../shared/data``, the bundled samples of
  :mod:`onlstm_tasks.sample_data`, or a toy text corpus for WikiText-103 and the kit's 5.3M-token unlabelled
  English); batches of 4;
* word vectors (the embedder's ``pretrained``, the data's ``vectors``): a stand-in file of a few words in the
  shrunk ``word_dim``, written in the work folder;
* the trainer: one step, one validation batch, on the CPU, writing under a temporary folder.

The ``pretrained_lm`` configs (``ner/ontonotes_onlstm_crf_lm_init.yaml``,
``absa/semeval14_laptops_onlstm_td_lm_init.yaml``) and the ``lm_features`` one
(``ner/ontonotes_onlstm_crf_vectors_lm_features.yaml``) read the checkpoint that ``lm/unlabelled_en_onlstm_bi.yaml``
writes (their ``pretrained_lm`` path, relative to the working folder): unless that config already ran in the same
folder, it runs first.

The ``tree_source: lm`` configs read the checkpoint of the language model pretrained on ``unlabelled_en``
(``lm_checkpoint: runs/lm_unlabelled_en/...``). Unless it is there, a stand-in is written at that path: the
best checkpoint of ``lm/ontonotes_onlstm.yaml`` (the same 3-layer unidirectional ON-LSTM shape), fitted one step.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import yaml

from helpers.paths import REPO
from helpers.lm import write_toy_corpus
from onlstm_tasks.cli.lightning_cli import TasksCLI
from onlstm_tasks.sample_data import sample_path
from helpers.shared_data import SHARED_DATA, requires_shared_data

CONFIG_DIR = REPO / "configs"
CONFIGS = sorted(CONFIG_DIR.rglob("*.yaml"))
SIZE_KEYS = {"hidden_size", "word_dim", "char_dim", "char_features", "embedding_dim", "attention_size"}
LM_FOR_INIT = "lm/unlabelled_en_onlstm_bi.yaml"  # writes the pretrained_lm of the *_lm_init configs
UNLABELLED_EN = "../shared/data/unlabelled_en/"  # the kit's unlabelled text, as the configs name it
LM_FOR_TREES = "lm/ontonotes_onlstm.yaml"  # the stand-in for the pretrained language model of tree_source: lm


def tiny(size: int) -> int:
    """An even size about 1/32 of ``size`` (256 -> 8, 100 -> 4, 1150 -> 36), the same for the same value."""
    return 2 * math.ceil(size / 64)


def shrink(node: object) -> object:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in SIZE_KEYS and isinstance(value, int) and not isinstance(value, bool):
                out[key] = tiny(value)
            elif key in SIZE_KEYS and isinstance(value, list):
                out[key] = [tiny(v) for v in value]
            elif key == "chunk_size":
                out[key] = 2
            elif key == "adaptive_cutoffs" and isinstance(value, list):
                out[key] = [4 * (i + 1) for i in range(len(value))]
            else:
                out[key] = shrink(value)
        return out
    if isinstance(node, list):
        return [shrink(v) for v in node]
    return node


def conll2003_hub_copy(root: Path) -> Path:
    """The bundled NER sample in the layout of ``eriktks/conll2003``'s parquet conversion (``conll2003/{split}/
    0000.parquet``; ``tokens``, ``ner_tags`` as ClassLabel ids)."""
    import datasets

    names = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    features = datasets.Features({"id": datasets.Value("string"),
                                  "tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner_tags": datasets.Sequence(datasets.ClassLabel(names=names))})
    for split in ("train", "validation", "test"):
        sentences = [block.split("\n") for block in
                     (sample_path("ner") / f"{split}.txt").read_text().strip().split("\n\n")]
        rows = [[line.rsplit(" ", 1) for line in block if line.strip()] for block in sentences]
        data = {"id": [str(i) for i in range(len(rows))], "tokens": [[w for w, _ in r] for r in rows],
                "ner_tags": [[names.index(t) for _, t in r] for r in rows]}
        folder = root / "conll2003" / split
        folder.mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(data, features=features).to_parquet(str(folder / "0000.parquet"))
    return root


def local_data(init_args: dict, work: Path) -> dict:
    """The data module's arguments with its source replaced by a local stand-in (module docstring)."""
    args = dict(init_args)
    path = args.get("path")
    if path in ("ontonotes/conll2012_ontonotesv5",):
        args.update(path=str(SHARED_DATA / "conll2012_ontonotesv5"), revision=None)
    elif path == "data/uner_en_ewt":
        args["path"] = str(SHARED_DATA / "uner_en_ewt")
    elif path == "tomaarsen/setfit-absa-semeval-laptops":
        args["path"] = str(SHARED_DATA / "setfit-absa-semeval-laptops")
    elif path == "tomaarsen/setfit-absa-semeval-restaurants":  # the kit has laptops only: the bundled sample
        args.update(path=str(sample_path("absa")), data_dir=None, revision=None)
    elif path == "onlstm_tasks/sample_data/ner":
        args["path"] = str(sample_path("ner"))
    elif path == "eriktks/conll2003":  # the bundled NER sample, written in the hub's parquet layout
        args.update(path=str(conll2003_hub_copy(work / "conll2003_hub")), revision=None)
    elif path == "Salesforce/wikitext":
        files = write_toy_corpus(work / "toy_corpus", {"train": 120, "validation": 20, "test": 20})
        args.update(path="text", name=None, data_files=files)
    elif path == "text" and all(str(f).startswith(UNLABELLED_EN) for f in (args.get("data_files") or {}).values()):
        args["data_files"] = write_toy_corpus(work / "toy_corpus", {"train": 120, "validation": 20, "test": 20})
    else:
        pytest.fail(f"no local stand-in for the data path {path!r}: add one to tests/cli/test_every_config.py")
    if args.get("parses") == "data/semeval2014_laptops":
        args["parses"] = str(SHARED_DATA / "semeval2014_laptops")
    elif "parses" in args and args["parses"] is not None:
        pytest.fail(f"no local stand-in for the parses {args['parses']!r}")
    args["batch_size"] = 4
    if "eval_batch_size" in args:
        args["eval_batch_size"] = 4
    return args


STAND_IN_WORDS = ["the", "of", "said", "in", "New", "York", "unseenword", "0000"]


def stand_in_vectors(dim: int, work: Path) -> str:
    """A word2vec text file of :data:`STAND_IN_WORDS` with ``dim``-dimensional vectors (in ``work``)."""
    path = work / "vectors" / f"stand_in.{dim}d.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{len(STAND_IN_WORDS)} {dim}"]
    lines += [f"{w} {' '.join(str((i + j) % 7 / 10) for j in range(dim))}" for i, w in enumerate(STAND_IN_WORDS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def local_vectors(cfg: dict, work: Path) -> None:
    """Every vectors file a (shrunk) config names -> :func:`stand_in_vectors` of its embedder's ``word_dim``; the
    data's ``vectors`` must name the same file as the embedder's ``pretrained``."""
    embedder = cfg["model"].get("init_args", {}).get("embedder") or {}
    args = embedder.get("init_args", {})
    pretrained, vectors = args.get("pretrained"), cfg["data"].get("init_args", {}).get("vectors")
    if vectors and vectors != pretrained:
        pytest.fail(f"data vectors {vectors!r} differ from the embedder's pretrained {pretrained!r}")
    if pretrained:
        args["pretrained"] = stand_in_vectors(args["word_dim"], work)
        if vectors:
            cfg["data"]["init_args"]["vectors"] = args["pretrained"]


def local_tree_monitors(cfg: dict) -> None:
    """A TreeF1Monitor's gold trees under ../shared/data -> the same folder (read from any working folder), and only
    the first few trees (a one-step fit scores them once)."""
    for callback in (cfg.get("trainer") or {}).get("callbacks") or []:
        if callback.get("class_path", "").endswith("TreeF1Monitor"):
            args = callback.setdefault("init_args", {})
            if str(args.get("gold", "")).startswith("../shared/data/"):
                args["gold"] = str(SHARED_DATA / args["gold"][len("../shared/data/"):])
            args["limit"] = 8


def tiny_copy(config: Path, work: Path) -> Path:
    cfg = yaml.safe_load(config.read_text())
    cfg["model"] = shrink(cfg["model"])
    cfg["data"]["init_args"] = local_data(cfg["data"].get("init_args", {}), work)
    local_vectors(cfg, work)
    local_tree_monitors(cfg)
    cfg["trainer"] = {**cfg.get("trainer", {}), "max_steps": 1, "max_epochs": 1, "limit_train_batches": 1,
                      "limit_val_batches": 1, "num_sanity_val_steps": 0, "accelerator": "cpu", "devices": 1,
                      "enable_progress_bar": False, "enable_model_summary": False}
    cfg.pop("test_after_fit", None)  # fit only: the step of the test loop is the validation step's
    out = work / "configs" / config.parent.name / config.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(cfg))
    return out


def fit_one_step(config: Path, work: Path):
    cli = TasksCLI(model_class=None, datamodule_class=None, subclass_mode_model=True, subclass_mode_data=True,
                   args=["--config", str(tiny_copy(config, work))], run=False,
                   save_config_kwargs={"overwrite": True}, trainer_defaults={"use_distributed_sampler": False})
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli


def lm_checkpoints(node: object) -> list[str]:
    """Every ``lm_checkpoint`` (of a ``tree_source: lm``) in a config's model block."""
    if isinstance(node, dict):
        found = [node["lm_checkpoint"]] if isinstance(node.get("lm_checkpoint"), str) else []
        return found + [p for value in node.values() for p in lm_checkpoints(value)]
    if isinstance(node, list):
        return [p for value in node for p in lm_checkpoints(value)]
    return []


def stand_in_lm(path: str, work: Path) -> None:
    """The best checkpoint of :data:`LM_FOR_TREES` fitted one step (in ``work``), copied to ``path``."""
    fit_one_step(CONFIG_DIR / LM_FOR_TREES, work)
    written = sorted(Path("runs/lm_ontonotes").rglob("best.ckpt"), key=lambda p: p.stat().st_mtime)
    assert written, "lm/ontonotes_onlstm.yaml wrote no best.ckpt"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(written[-1], path)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("every_config")


@requires_shared_data
@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(CONFIG_DIR)))
def test_config_builds_and_takes_a_training_and_a_validation_step(config, workdir, monkeypatch):
    monkeypatch.chdir(workdir)  # the configs' relative run folders (and pretrained_lm) land here
    model = yaml.safe_load(config.read_text())["model"]["init_args"]
    for key in ("pretrained_lm", "lm_features"):
        if model.get(key):
            assert model[key].startswith("runs/lm_unlabelled_en_bi/"), "which config writes this checkpoint?"
            if not Path(model[key]).is_file():
                fit_one_step(CONFIG_DIR / LM_FOR_INIT, workdir)
            assert Path(model[key]).is_file()
    for path in lm_checkpoints(model):
        assert path.startswith("runs/lm_unlabelled_en"), "which config writes this checkpoint?"
        if not Path(path).is_file():
            stand_in_lm(path, workdir)
    cli = fit_one_step(config, workdir)
    assert cli.trainer.global_step == 1
    assert any(key.startswith("val_") for key in cli.trainer.callback_metrics), cli.trainer.callback_metrics
    for name, value in cli.trainer.callback_metrics.items():
        assert value.isfinite().all(), name


def test_a_broken_class_path_fails(tmp_path, monkeypatch):
    """The test above fails for a config naming a class that does not exist."""
    monkeypatch.chdir(tmp_path)
    broken = tmp_path / "quickstart.yaml"
    cfg = yaml.safe_load((CONFIG_DIR / "quickstart.yaml").read_text())
    cfg["model"]["init_args"]["encoder"]["class_path"] = "onlstm_tasks.encoders.NoSuchEncoder"
    broken.write_text(yaml.safe_dump(cfg))
    with pytest.raises(SystemExit) as exit_info:
        fit_one_step(broken, tmp_path / "work")
    assert exit_info.value.code not in (0, None)
