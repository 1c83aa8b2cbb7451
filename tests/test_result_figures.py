"""Every model-quality figure README and benchmarks/README quote as ``mean ± std`` comes from a table in
``benchmarks/results/``: each one, in the order the document gives them, is listed below with the JSON, the row and
the metric it quotes, and must equal that JSON's mean and sample std as rounded in the document. A figure added to
a document without a line here, or a table re-made without the documents following it, fails.

And every cited table says which code made it: a table re-made by ``scripts/compare.py`` records its commit
(``code.commit``), which must contain the batch-order fix (``eebfc79``); a table that does not yet is listed in
:data:`AWAITING_RERUN`, and a re-made table left in that list fails too.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess

import pytest
from helpers.paths import REPO

RESULTS = REPO / "benchmarks" / "results"
BATCH_ORDER_FIX = "eebfc79"
FIGURE = re.compile(r"(\d+(?:\.\d+)?) ± (\d+(?:\.\d+)?)")


def compare_row(table: str, label: str, metric: str, scale: float = 100.0):
    """The mean and std of ``metric`` over the seeds of the row ``label`` of a ``scripts/compare.py`` table."""
    def read() -> tuple[float, float]:
        data = json.loads((RESULTS / f"{table}.json").read_text())
        row = next(row for row in data["configs"] if row["label"] == label)
        cell = row["metrics"][metric]
        return cell["mean"] * scale, cell["std"] * scale
    return table, read


def chosen_trees(table: str, label: str):
    """The mean and std over seeds of the test UF1 of the tree reading each language model's validation chose
    (``scripts/lm_trees_study.py``'s tables)."""
    def read() -> tuple[float, float]:
        runs = json.loads((RESULTS / f"{table}.json").read_text())["runs"][label]
        values = [run["test"][run["chosen"]] for run in runs]
        return statistics.mean(values), statistics.stdev(values)
    return table, read


RECIPE, TD, GPU = "ontonotes_recipe", "laptops_td_recipe", "ontonotes_gpu_config"
SHIPPED, GPU_ROW = "shipped config (batch 32)", "GPU config (128 rows, 4096 tokens)"
UNER_V, ONTO_V, LAPTOPS_V = "uner_dg_vectors_trees", "ontonotes_syntax_on_vectors", "laptops_syntax_on_vectors"
VECTOR_TREES = [
    compare_row(UNER_V, "no tree", "test_f1"), compare_row(UNER_V, "LM trees (best single reading)", "test_f1"),
    compare_row(UNER_V, "LM trees (ensemble)", "test_f1"), compare_row(UNER_V, "gold trees", "test_f1"),
    compare_row(ONTO_V, "vectors, dependency-guided, no tree", "test_f1"),
    compare_row(ONTO_V, "vectors + LM trees (dependency-guided)", "test_f1"),
    compare_row(ONTO_V, "vectors + gold trees (dependency-guided)", "test_f1"),
    compare_row(TD, "ON-LSTM TD, vectors recipe", "test_accuracy"),
    compare_row(TD, "ON-LSTM TD, vectors recipe", "test_macro_f1"),
    compare_row(LAPTOPS_V, "tree-aware head, vectors + LM trees", "test_accuracy"),
    compare_row(LAPTOPS_V, "tree-aware head, vectors + LM trees", "test_macro_f1"),
    compare_row(LAPTOPS_V, "tree-aware head, vectors + gold trees", "test_accuracy"),
    compare_row(LAPTOPS_V, "tree-aware head, vectors + gold trees", "test_macro_f1"),
    compare_row(RECIPE, "ON-LSTM-CRF, vectors recipe", "test_f1"),
    compare_row(ONTO_V, "vectors + LM features", "test_f1"),
]

FIGURES = {
    "README.md": [
        compare_row(RECIPE, "ON-LSTM-CRF, vectors recipe", "test_f1"),
        compare_row(RECIPE, "LSTM-CRF, vectors recipe", "test_f1"),
        compare_row(GPU, GPU_ROW, "best val_f1"), compare_row(GPU, SHIPPED, "best val_f1"),
        compare_row(TD, "ON-LSTM TD, vectors recipe", "test_accuracy"),
        compare_row(TD, "LSTM TD, vectors recipe", "test_accuracy"),
        compare_row(TD, "ON-LSTM TD, before issue 18", "test_accuracy"),
        compare_row(UNER_V, "LM trees (best single reading)", "test_f1"), compare_row(UNER_V, "no tree", "test_f1"),
        compare_row(UNER_V, "LM trees (ensemble)", "test_f1"), compare_row(UNER_V, "gold trees", "test_f1"),
        compare_row(ONTO_V, "vectors + LM features", "test_f1"),
        compare_row(RECIPE, "ON-LSTM-CRF, vectors recipe", "test_f1"),
        compare_row(ONTO_V, "vectors + LM trees (dependency-guided)", "test_f1"),
        compare_row(ONTO_V, "vectors, dependency-guided, no tree", "test_f1"),
        compare_row(ONTO_V, "vectors + gold trees (dependency-guided)", "test_f1"),
        compare_row(LAPTOPS_V, "tree-aware head, vectors + LM trees", "test_accuracy"),
        compare_row(LAPTOPS_V, "tree-aware head, vectors + LM trees", "test_macro_f1"),
        compare_row(TD, "ON-LSTM TD, vectors recipe", "test_accuracy"),
        compare_row(TD, "ON-LSTM TD, vectors recipe", "test_macro_f1"),
        compare_row(LAPTOPS_V, "tree-aware head, vectors + gold trees", "test_accuracy"),
        compare_row(LAPTOPS_V, "tree-aware head, vectors + gold trees", "test_macro_f1"),
        compare_row("uner_dg_trees", "gold trees", "test_f1"), compare_row("uner_dg_trees", "no tree", "test_f1"),
        chosen_trees("lm_unlabelled_en_bi_seeds", "ON-LSTM_bi"),
        compare_row("ontonotes_lm_init", "ON-LSTM-CRF, LM-initialised", "test_f1"),
        compare_row("ontonotes_lm_init", "ON-LSTM-CRF, from scratch", "test_f1"),
        compare_row("laptops_lm_init", "ON-LSTM TD, LM-initialised", "test_accuracy"),
        compare_row("laptops_lm_init", "ON-LSTM TD, from scratch", "test_accuracy"),
    ],
    "benchmarks/README.md": [
        compare_row(RECIPE, "ON-LSTM-CRF, before issue 18", "test_f1"),
        compare_row(RECIPE, "ON-LSTM-CRF, vectors recipe", "test_f1"),
        compare_row(RECIPE, "LSTM-CRF, vectors recipe", "test_f1"),
        compare_row(TD, "ON-LSTM TD, before issue 18", "test_accuracy"),
        compare_row(TD, "ON-LSTM TD, before issue 18", "test_macro_f1"),
        compare_row(TD, "ON-LSTM TD, vectors recipe", "test_accuracy"),
        compare_row(TD, "ON-LSTM TD, vectors recipe", "test_macro_f1"),
        compare_row(TD, "LSTM TD, vectors recipe", "test_accuracy"),
        compare_row(TD, "LSTM TD, vectors recipe", "test_macro_f1"),
        compare_row(GPU, SHIPPED, "best val_f1", 1.0), compare_row(GPU, SHIPPED, "test_f1", 1.0),
        compare_row(GPU, GPU_ROW, "best val_f1", 1.0), compare_row(GPU, GPU_ROW, "test_f1", 1.0),
        chosen_trees("lm_unlabelled_en_bi_seeds", "ON-LSTM_bi"),
        *(compare_row("uner_dg_trees", label, "test_f1")
          for label in ("no tree", "induced trees (task)", "LM trees", "gold trees")),
        *VECTOR_TREES,
        compare_row("ontonotes_lm_init", "ON-LSTM-CRF, LM-initialised", "test_f1"),
        compare_row("ontonotes_lm_init", "ON-LSTM-CRF, from scratch", "test_f1"),
        compare_row("laptops_lm_init", "ON-LSTM TD, LM-initialised", "test_accuracy"),
        compare_row("laptops_lm_init", "ON-LSTM TD, LM-initialised", "test_macro_f1"),
        compare_row("laptops_lm_init", "ON-LSTM TD, from scratch", "test_accuracy"),
        compare_row("laptops_lm_init", "ON-LSTM TD, from scratch", "test_macro_f1"),
    ],
}

# cited tables whose JSON predates the batch-order fix (trained before eebfc79, no recorded commit); each leaves
# this list when scripts/compare.py re-makes it (issue 50)
AWAITING_RERUN: set[str] = set()


def rounded(value: float, like: str) -> str:
    decimals = len(like.split(".")[1]) if "." in like else 0
    return f"{value:.{decimals}f}"


@pytest.mark.parametrize("doc", sorted(FIGURES))
def test_every_quoted_figure_equals_its_table(doc):
    text = (REPO / doc).read_text()
    quoted = FIGURE.findall(text)
    refs = FIGURES[doc]
    assert len(quoted) == len(refs), f"{doc} quotes {len(quoted)} mean ± std figures; this test lists {len(refs)}"
    wrong = []
    for (mean_text, std_text), (table, read) in zip(quoted, refs):
        mean, std = read()
        got = f"{rounded(mean, mean_text)} ± {rounded(std, std_text)}"
        if got != f"{mean_text} ± {std_text}":
            wrong.append(f"{mean_text} ± {std_text} quoted, {table}.json gives {got}")
    assert not wrong, f"{doc}: " + "; ".join(wrong)


def cited_tables() -> set[str]:
    return {table for refs in FIGURES.values() for table, _ in refs}


def _contains(commit: str, ancestor: str) -> bool:
    done = subprocess.run(["git", "merge-base", "--is-ancestor", ancestor, commit], cwd=REPO, capture_output=True)
    return done.returncode == 0


def test_every_cited_table_records_code_that_contains_the_batch_order_fix():
    for table in sorted(cited_tables()):
        code = json.loads((RESULTS / f"{table}.json").read_text()).get("code")
        if table in AWAITING_RERUN:
            assert code is None, f"{table} was re-made ({code}): take it out of AWAITING_RERUN"
            continue
        assert code and code.get("commit"), f"{table}.json records no commit: re-make it with scripts/compare.py"
        assert not code.get("dirty"), f"{table}.json was made by uncommitted code"
        assert _contains(code["commit"], BATCH_ORDER_FIX), f"{table}.json: {code['commit']} predates {BATCH_ORDER_FIX}"
    assert AWAITING_RERUN <= cited_tables(), AWAITING_RERUN - cited_tables()
