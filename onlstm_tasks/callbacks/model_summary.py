"""The model summary without a FLOPs column: Lightning's summary counts FLOPs only for a model with an
``example_input_array``, which the task models (their batches are dataclasses) have not, so it printed ``Total
FLOPs: 0`` and a column of zeros on every run."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import ModelSummary, RichModelSummary
from lightning.pytorch.utilities.model_summary.model_summary import get_formatted_model_size, \
    get_human_readable_count


class ModelSummaryWithoutFlops(ModelSummary):
    """Lightning's ``ModelSummary`` (same arguments): the layers' names, types, parameters and modes, then the
    totals, without FLOPs where none were counted; as a Rich table where ``rich`` is installed."""

    @staticmethod
    def summarize(summary_data: list[tuple[str, list[str]]], total_parameters: int, trainable_parameters: int,
                  model_size: float, total_training_modes: dict[str, int], total_flops: int,
                  **summarize_kwargs: Any) -> None:
        columns = [(name, values) for name, values in summary_data if name != "FLOPs" or total_flops]
        totals = [("Trainable params", get_human_readable_count(int(trainable_parameters))),
                  ("Non-trainable params", get_human_readable_count(int(total_parameters - trainable_parameters))),
                  ("Total params", get_human_readable_count(int(total_parameters))),
                  ("Total estimated model params size (MB)", get_formatted_model_size(model_size)),
                  ("Modules in train mode", str(total_training_modes["train"])),
                  ("Modules in eval mode", str(total_training_modes["eval"]))]
        if total_flops:
            totals.append(("Total FLOPs", get_human_readable_count(total_flops)))
        try:
            from rich import get_console
            from rich.table import Table
        except ImportError:
            width = max(len(name) for name, _ in totals)
            rows = [" | ".join(str(v) for v in row) for row in zip(*(values for _, values in columns))]
            print("\n".join([" | ".join(name for name, _ in columns), *rows,
                             *(f"{name:<{width}}: {value}" for name, value in totals)]))
            return
        table = Table(header_style=summarize_kwargs.get("header_style", "bold magenta"))
        table.add_column(" ", style="dim")
        for name, _ in columns[1:]:
            table.add_column(name, justify="right" if name in ("Params", "Params per Device", "FLOPs") else "left")
        for row in zip(*(values for _, values in columns)):
            table.add_row(*row)
        console = get_console()
        console.print(table)
        grid = Table.grid(expand=True)
        grid.add_column()
        for name, value in totals:
            grid.add_row(f"[bold]{name}[/]: {value}")
        console.print(grid)


LIGHTNING_SUMMARIES = (ModelSummary, RichModelSummary)


def summary_for(callback):
    """:class:`ModelSummaryWithoutFlops` with the settings of one of Lightning's own summaries (exactly that
    class), else None."""
    if type(callback) not in LIGHTNING_SUMMARIES:
        return None
    return ModelSummaryWithoutFlops(max_depth=callback._max_depth, **callback._summarize_kwargs)
