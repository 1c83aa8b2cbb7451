"""Tree ensembles: one reading made of several readings of syntactic distances.

A *reading* is a way to read one distance per token off trained ON-LSTMs: which model (several language models,
e.g. of different seeds), which master gate (``forget``, the paper's, or ``input``), which layer and how the two
directions are combined (:class:`Reading`). Different readings disagree about scale (a forget-gate distance lies in
[0, 1], an input-gate one nearer 0; layers differ) but the greedy split only compares distances within a sentence.
So each member's distances are replaced by their per-sentence ranks scaled to [0, 1] (:func:`rank_normalise`) and
the ensemble's distance is the mean of its members' (:func:`ensemble_distances`).

Rank normalisation is strictly increasing and keeps ties tied, so the greedy split (which takes the leftmost maximum)
builds exactly the same tree from an ensemble of one reading as from that reading.

Members are chosen on validation trees by greedy forward selection (:func:`choose_members`): the best single
reading, then, while it helps, the reading whose addition scores best.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from onlstm_tasks.trees.source import DIRECTION_COMBINATIONS as COMBINATIONS
from onlstm_tasks.trees.source import DISTANCE_GATES as GATES

_SPEC = re.compile(r"(?:m(?P<model>\d+):)?(?P<gate>\w+):l(?P<layer>\d+):(?P<combination>\w+)")

K = TypeVar("K")


@dataclass(frozen=True, order=True)
class Reading:
    """Model ``model``'s layer ``layer`` (0-based), master gate ``gate``, directions merged by ``combination``.

    Written ``m1:input:l2:mean`` (model and layer 1-based, as ``onlstm-trees eval`` prints them; ``m1:`` may be
    left out for the first model)."""

    model: int
    gate: str
    layer: int
    combination: str

    def __post_init__(self) -> None:
        if self.gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {self.gate!r}")
        if self.combination not in COMBINATIONS:
            raise ValueError(f"direction combination must be one of {COMBINATIONS}, got {self.combination!r}")
        if self.model < 0 or self.layer < 0:
            raise ValueError(f"model and layer count from 0 here (1 in the written form), got {self}")

    @classmethod
    def parse(cls, spec: str) -> Reading:
        match = _SPEC.fullmatch(spec.strip())
        if not match or int(match["layer"]) < 1 or int(match["model"] or 1) < 1:
            raise ValueError(f"a reading is written [mMODEL:]GATE:lLAYER:COMBINATION with MODEL and LAYER from 1, "
                             f"e.g. m1:input:l2:mean; got {spec!r}")
        return cls(int(match["model"] or 1) - 1, match["gate"], int(match["layer"]) - 1, match["combination"])

    def __str__(self) -> str:
        return f"m{self.model + 1}:{self.gate}:l{self.layer + 1}:{self.combination}"


def parse_readings(spec: str) -> list[Reading]:
    """The readings of a comma-separated list (``m1:input:l2:mean,m2:forget:l1:forward``), each once."""
    readings = [Reading.parse(part) for part in spec.split(",") if part.strip()]
    if not readings:
        raise ValueError(f"no reading in {spec!r}")
    return list(dict.fromkeys(readings))


def rank_normalise(values: torch.Tensor) -> torch.Tensor:
    """One sentence's distances ``[n]`` as their ranks scaled to [0, 1]: the smallest 0, the largest 1, tied values
    sharing their mean rank (a one-token sentence gives 0)."""
    if values.dim() != 1 or values.numel() == 0:
        raise ValueError(f"expected one sentence's distances, a non-empty 1-D tensor; got shape {tuple(values.shape)}")
    n = values.numel()
    if n == 1:
        return torch.zeros(1, dtype=torch.float64)
    v = values.double()
    below = (v.unsqueeze(1) > v.unsqueeze(0)).sum(1)  # how many values are smaller
    equal = (v.unsqueeze(1) == v.unsqueeze(0)).sum(1)  # how many are equal (itself included)
    return (below + (equal - 1) / 2) / (n - 1)


def ensemble_distances(members: Sequence[torch.Tensor]) -> torch.Tensor:
    """The ensemble's distances of one sentence: the mean of its members' rank-normalised distances (each ``[n]``)."""
    return mean_of_normalised([rank_normalise(m) for m in members])


def mean_of_normalised(normalised: Sequence[torch.Tensor]) -> torch.Tensor:
    """:func:`ensemble_distances` of members already rank-normalised (scorers normalise each reading once)."""
    if not normalised:
        raise ValueError("an ensemble needs at least one member")
    lengths = {m.numel() for m in normalised}
    if len(lengths) != 1:
        raise ValueError(f"the members read sentences of different lengths: {sorted(lengths)}")
    return torch.stack(list(normalised)).mean(0)


def choose_members(candidates: Sequence[K], score: Callable[[list[K]], float], max_members: int = 8) -> list[K]:
    """Greedy forward selection: the best single candidate, then, while the score strictly rises and fewer than
    ``max_members`` are chosen, the candidate whose addition scores best (ties: the earlier candidate)."""
    if not candidates:
        raise ValueError("no candidate to choose from")
    if max_members < 1:
        raise ValueError(f"max_members must be positive, got {max_members}")
    chosen: list[K] = []
    best = float("-inf")
    while len(chosen) < max_members:
        trials = [(score([*chosen, c]), i) for i, c in enumerate(candidates) if c not in chosen]
        if not trials:
            break
        value, index = max(trials, key=lambda t: (t[0], -t[1]))
        if value <= best:
            break
        chosen.append(candidates[index])
        best = value
    return chosen
