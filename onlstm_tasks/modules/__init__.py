"""Plain ``nn.Module`` networks the task models compose: the CRF tagger network, the aspect heads, the
language-model network, and the CRF with its constrained transitions.

No Lightning here, not even through another module (an import-linter contract). By the layer order (DESIGN.md)
it may import embedders, metrics, data (its Lightning-free building blocks: batches, vocabularies, tags),
encoders, interaction, trees and errors; never tasks, callbacks, cli or probing.
"""

from onlstm_tasks.modules.crf import CRF, viterbi_decode
from onlstm_tasks.modules.transitions import allowed_transitions, parse_label

__all__ = ["CRF", "allowed_transitions", "parse_label", "viterbi_decode"]
