"""``python -m onlstm_tasks.cli``: the console script ``onlstm-tasks``."""

from .console import main

main()
