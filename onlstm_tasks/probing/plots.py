"""Pictures of one sentence: the master-gate heatmaps (the segmented update) and the induced tree, via matplotlib.

matplotlib is an optional dependency (the ``dev`` extra): it is imported, with the Agg backend, only when a
picture is drawn, and a missing install is reported with how to get it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import torch

from onlstm_tasks.trees.induce import Tree, tree_to_brackets


PLOT_EXTRA_HINT = ("plotting needs matplotlib, which is not installed: pip install 'onlstm-tasks[plot]' (in a clone: "
                   "pip install -e '.[plot]'), or pip install matplotlib")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError(PLOT_EXTRA_HINT) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def tree_layout(tree: Tree) -> tuple[list[tuple[float, float, float, float]], int]:
    """Line segments ``(x0, y0, x1, y1)`` drawing ``tree`` as a dendrogram hanging below its leaves.

    Leaves sit at ``x = 0, 1, ...`` (token order), ``y = 0``; an inner node sits at ``y = -height`` (a node one
    above its highest child), centred over its children, joined to each child by an elbow. Returns the segments
    and the tree's height.
    """
    segments: list[tuple[float, float, float, float]] = []
    position = 0

    def place(node: Tree) -> tuple[float, int]:  # (x, height); recursion depth = tree height
        nonlocal position
        if not isinstance(node, tuple):
            position += 1
            return float(position - 1), 0
        children = [place(child) for child in node]
        height = 1 + max(h for _, h in children)
        xs = [x for x, _ in children]
        segments.append((min(xs), -height, max(xs), -height))
        for x, h in children:
            segments.append((x, -h, x, -height))
        return sum(xs) / len(xs), height

    _, height = place(tree)
    return segments, height


def plot_master_gates(
    words: Sequence[str],
    forget: torch.Tensor,
    input: torch.Tensor,
    tree: Tree,
    out: str | Path,
    title: str = "",
) -> Path:
    """Writes a PNG with, over the sentence's tokens: the master forget gate f~ [n, levels] and the master input
    gate i~ [n, levels] as heatmaps (level 0 at the bottom), each with the number of levels it erases / writes
    (``(1 - mean f~) * L``, ``mean(i~) * L``) as a line, and ``tree`` (leaves in token order) drawn below."""
    plt = _pyplot()
    forget, input = forget.detach().float().cpu(), input.detach().float().cpu()
    n, levels = forget.shape
    if len(words) != n or input.shape != forget.shape:
        raise ValueError(f"got {len(words)} words, forget gates {tuple(forget.shape)} and input gates "
                         f"{tuple(input.shape)}; expected [words, levels] for both")
    segments, height = tree_layout(tree)
    rotate = max(map(len, words)) > 3 and n > 6
    width = max(6.0, 0.55 * n + 2.5)
    fig, axes = plt.subplots(3, 1, figsize=(width, 8.0 + 0.15 * height),
                             gridspec_kw={"height_ratios": [1.0, 1.0, 0.6 + 0.08 * height],
                                          "hspace": 0.45 if rotate else 0.25})
    fig.subplots_adjust(top=0.94)
    x = list(range(n))
    panels = (
        (axes[0], forget, (1.0 - forget.mean(dim=1)) * levels, "master forget f~",
         "levels erased: (1 - mean f~) * L"),
        (axes[1], input, input.mean(dim=1) * levels, "master input i~", "levels written: mean(i~) * L"),
    )
    for ax, gate, count, name, line_label in panels:
        image = ax.imshow(gate.t().numpy(), origin="lower", aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0,
                          interpolation="nearest", extent=(-0.5, n - 0.5, -0.5, levels - 0.5))
        ax.step(x, (count - 0.5).tolist(), where="mid", color="white", linewidth=1.5, label=line_label)
        ax.plot(x, (count - 0.5).tolist(), "o", color="white", markersize=3)
        ax.set_ylabel(f"{name}\nlevel (low -> high)")
        ax.set_ylim(-0.5, levels - 0.5)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_xticks(x)
        if ax is axes[0]:  # the tree panel names the words under the second heatmap
            ax.set_xticklabels(words, rotation=45 if rotate else 0, ha="right" if rotate else "center", fontsize=9)
        else:
            ax.tick_params(axis="x", labelbottom=False)
        ax.legend(loc="upper right", fontsize=7, framealpha=0.6)
        fig.colorbar(image, ax=ax, pad=0.01, fraction=0.03)

    # the tree hangs below its leaves; the words sit on top of it, aligned with the heatmap columns
    tree_ax = axes[2]
    for x0, y0, x1, y1 in segments:
        tree_ax.plot([x0, x1], [y0, y1], color="black", linewidth=1.2)
    tree_ax.plot(x, [0] * n, "s", color="black", markersize=3)
    tree_ax.set_xlim(-0.5, n - 0.5)
    tree_ax.set_ylim(-height - 0.3, 0.3)
    tree_ax.set_yticks([])
    tree_ax.xaxis.tick_top()
    tree_ax.set_xticks(x)
    tree_ax.set_xticklabels(words, rotation=45 if rotate else 0, ha="left" if rotate else "center", fontsize=9)
    tree_ax.tick_params(axis="x", length=0)
    for side in ("top", "right", "left", "bottom"):
        tree_ax.spines[side].set_visible(False)
    # keep the tree panel as wide as the heatmaps (which give up room to their colour bars)
    fig.canvas.draw()
    heat, box = axes[1].get_position(), tree_ax.get_position()
    tree_ax.set_position([heat.x0, box.y0, heat.width, box.height])
    brackets = tree_to_brackets(tree, list(words))
    tree_ax.set_xlabel("\n".join(textwrap.wrap(f"induced tree: {brackets}", int(12 * width))), fontsize=8,
                       loc="left")
    if title:
        fig.suptitle(title, fontsize=10)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out
