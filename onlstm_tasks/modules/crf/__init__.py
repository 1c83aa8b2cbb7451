"""The linear-chain CRF: its parameters and contract (:mod:`.layer`: :class:`CRF`), the paths that compute it and
the one place that chooses (:mod:`.paths`), and the paths themselves: the GPU's Triton kernels
(:mod:`.triton_path`), the semiring scans (:mod:`.scan`), the compiled forward-backward (:mod:`.compiled`) and the
per-step loops (:mod:`.loop`, with pytorch-crf's, the oracle).
``onlstm_tasks.modules.crf.CRF`` is the path configs and checkpoints name."""

from .layer import CRF
from .loop import viterbi_decode

__all__ = ["CRF", "viterbi_decode"]
