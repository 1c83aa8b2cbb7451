"""Pure-torch building blocks shared by the task heads (no Lightning imports)."""

from onlstm_tasks.modules.crf import CRF, viterbi_decode
from onlstm_tasks.modules.transitions import allowed_transitions, parse_label

__all__ = ["CRF", "allowed_transitions", "parse_label", "viterbi_decode"]
