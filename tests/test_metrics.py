import os
import random
import socket
import tempfile
import warnings
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from onlstm_tasks.metrics import EntityF1

IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
IOBES = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]

# (gold, predicted) sentences in IOB2
HAND = [
    # gold PER[0,1] LOC[3]; predicted PER[0,1]                      -> tp 1, gold 2, pred 1
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "I-PER", "O", "O"]),
    # gold LOC[0]; predicted LOC[0] PER[1]                          -> tp 1, gold 1, pred 2
    (["B-LOC", "O"], ["B-LOC", "B-PER"]),
    # gold none; predicted LOC[0,1]                                 -> tp 0, gold 0, pred 1
    (["O", "O"], ["B-LOC", "I-LOC"]),
    # gold PER[0,1]; predicted "I-PER I-PER": conlleval reads PER[0,1] (tp 1, pred 1),
    # strict IOB2 reads no entity (an entity must open with B-)   -> default tp 1 / strict tp 0, gold 1
    (["B-PER", "I-PER"], ["I-PER", "I-PER"]),
]
# default mode: tp 3, pred 5, gold 4 -> P 3/5, R 3/4, F1 2PR/(P+R) = 0.9/1.35 = 2/3
# strict mode:  tp 2, pred 4, gold 4 -> P = R = F1 = 1/2
EXPECTED = {"precision": 0.6, "recall": 0.75, "f1": 2 / 3,
            "strict_precision": 0.5, "strict_recall": 0.5, "strict_f1": 0.5}


def encode(sentences, labels, pad=-100):
    """List of (gold, pred) label sentences -> pred, gold [B, T] ids (padding = ``pad``) and mask."""
    steps = max(len(gold) for gold, _ in sentences)
    pred = torch.full((len(sentences), steps), pad)
    gold = torch.full((len(sentences), steps), pad)
    mask = torch.zeros((len(sentences), steps), dtype=torch.bool)
    for b, (g, p) in enumerate(sentences):
        gold[b, : len(g)] = torch.tensor([labels.index(x) for x in g])
        pred[b, : len(p)] = torch.tensor([labels.index(x) for x in p])
        mask[b, : len(g)] = True
    return pred, gold, mask


def scores(metric):
    return {k: round(float(v), 6) for k, v in metric.compute().items()}


def rounded(expected):
    return {k: round(v, 6) for k, v in expected.items()}


def test_hand_computed_scores_default_and_strict():
    metric = EntityF1(IOB2)
    metric.update(*encode(HAND, IOB2))
    assert scores(metric) == rounded(EXPECTED)
    assert all(v.dtype == torch.float32 for v in metric.compute().values())


def test_iobes_tags_are_scored_as_iob2():
    # the same sentences as HAND, written in IOBES (E-/S- where IOB2 has I-/B-)
    iobes = [
        (["B-PER", "E-PER", "O", "S-LOC"], ["B-PER", "E-PER", "O", "O"]),
        (["S-LOC", "O"], ["S-LOC", "S-PER"]),
        (["O", "O"], ["B-LOC", "E-LOC"]),
        (["B-PER", "E-PER"], ["I-PER", "E-PER"]),  # invalid IOBES start -> "I-PER I-PER" in IOB2
    ]
    metric = EntityF1(IOBES, scheme="iobes")
    metric.update(*encode(iobes, IOBES))
    assert scores(metric) == rounded(EXPECTED)


def test_padding_values_and_batching_do_not_matter():
    one = EntityF1(IOB2)
    one.update(*encode(HAND, IOB2, pad=-100))
    split = EntityF1(IOB2)
    for i in range(len(HAND)):  # one sentence per update, padded with a real tag id
        split.update(*encode(HAND[i : i + 1] + [(["O"] * 5, ["B-PER"] * 5)], IOB2, pad=3))
    # the extra sentence adds 5 false-positive PER entities in each of the 4 updates
    extra = EntityF1(IOB2)
    extra.update(*encode(HAND + [(["O"] * 5, ["B-PER"] * 5)] * 4, IOB2))
    assert scores(split) == scores(extra)
    assert scores(one) == rounded(EXPECTED)


def test_sentence_boundaries_are_kept():
    # "B-PER" ending one sentence and "I-PER" opening the next are two entities, not one
    metric = EntityF1(IOB2)
    metric.update(*encode([(["O", "B-PER"], ["O", "B-PER"]), (["I-PER", "O"], ["I-PER", "O"])], IOB2))
    assert "2" in metric.report().splitlines()[2]  # PER support 2
    assert scores(metric)["f1"] == 1.0


def random_sentences(count, seed=0):
    rng = random.Random(seed)
    return [([rng.choice(IOB2) for _ in range(n)], [rng.choice(IOB2) for _ in range(n)])
            for n in [rng.randint(1, 9) for _ in range(count)]]


def test_matches_seqeval_public_functions():
    from seqeval.metrics import f1_score, precision_score, recall_score
    from seqeval.scheme import IOB2 as SEQEVAL_IOB2

    sentences = random_sentences(60, seed=1)
    y_true, y_pred = [g for g, _ in sentences], [p for _, p in sentences]
    metric = EntityF1(IOB2)
    metric.update(*encode(sentences, IOB2))
    strict = {"mode": "strict", "scheme": SEQEVAL_IOB2}
    expected = {
        "precision": precision_score(y_true, y_pred), "recall": recall_score(y_true, y_pred),
        "f1": f1_score(y_true, y_pred), "strict_precision": precision_score(y_true, y_pred, **strict),
        "strict_recall": recall_score(y_true, y_pred, **strict), "strict_f1": f1_score(y_true, y_pred, **strict),
    }
    assert scores(metric) == rounded(expected)
    assert expected["f1"] != expected["strict_f1"]


def test_order_of_updates_does_not_change_the_result():
    sentences = random_sentences(40)
    results = []
    for seed in range(3):
        order = sentences[:]
        random.Random(seed).shuffle(order)
        metric = EntityF1(IOB2)
        for i in range(0, 40, 7):
            metric.update(*encode(order[i : i + 7], IOB2))
        results.append(scores(metric))
    assert results[0] == results[1] == results[2]
    assert 0 < results[0]["f1"] < 1


def test_report_and_reset():
    metric = EntityF1(IOB2)
    metric.update(*encode(HAND, IOB2))
    report = metric.report(digits=3)
    assert "LOC" in report and "PER" in report and "0.600" in report  # micro precision 3/5
    metric.reset()
    metric.update(*encode(HAND[:1], IOB2))
    assert scores(metric)["recall"] == 0.5


def test_empty_metric_does_not_crash():
    metric = EntityF1(IOB2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchmetrics warns that compute() ran before update()
        assert all(float(v) == 0.0 for v in metric.compute().values())
        assert "no entities" in metric.report()
    metric.update(*encode([(["O"], ["O"])], IOB2))
    assert all(float(v) == 0.0 for v in metric.compute().values())


def test_bad_labels_and_ids():
    with pytest.raises(ValueError, match="<pad>"):
        EntityF1(["<pad>", "O", "B-PER"])
    with pytest.raises(ValueError, match="E-PER"):
        EntityF1(["O", "E-PER"], scheme="iob2")
    metric = EntityF1(IOB2)
    metric.update(torch.tensor([[7]]), torch.tensor([[0]]), torch.tensor([[True]]))
    with pytest.raises(ValueError, match="7"):
        metric.compute()


# ---- DDP: two gloo processes on CPU ------------------------------------------------------------------------

# rank 0: one sentence, its entity found          -> its own F1 = 1
# rank 1: three sentences, all three entities missed (predicted as another type) -> its own F1 = 0
# pooled: tp 1, pred 4, gold 4 -> F1 = 1/4, while the average of the per-rank F1s is 1/2
RANK_SENTENCES = [
    [(["B-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"])],
    [(["B-LOC"], ["B-PER"]), (["O", "B-LOC", "I-LOC", "O", "O"], ["O", "B-PER", "I-PER", "O", "O"]),
     (["B-PER", "O"], ["B-LOC", "O"])],
]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_worker(rank, world_size, port, out_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=60))  # a mismatched collective fails instead of hanging
    try:
        results = {}
        metric = EntityF1(IOB2)
        for sentence in RANK_SENTENCES[rank]:  # one update per sentence: several list items per rank
            metric.update(*encode([sentence], IOB2))
        results["pooled"] = scores(metric)
        results["report"] = metric.report()
        local = EntityF1(IOB2, sync_on_compute=False)
        local.update(*encode(RANK_SENTENCES[rank], IOB2))
        results["local"] = scores(local)
        # rank 1 sees no batch at all (its states are empty): must still gather rank 0's sentences
        lonely = EntityF1(IOB2)
        if rank == 0:
            lonely.update(*encode(HAND, IOB2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results["lonely"] = scores(lonely)
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_ddp_gathers_sentences_instead_of_averaging_f1():
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_ddp_worker, args=(2, _free_port(), out_dir), nprocs=2, join=True)
        results = [torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(2)]

    single = EntityF1(IOB2)
    single.update(*encode(RANK_SENTENCES[0] + RANK_SENTENCES[1], IOB2))
    expected = scores(single)
    assert expected["f1"] == 0.25
    assert [r["local"]["f1"] for r in results] == [1.0, 0.0]  # average 0.5 != 0.25
    for r in results:
        assert r["pooled"] == expected
        assert r["report"] == single.report()
        assert r["lonely"] == rounded(EXPECTED)
