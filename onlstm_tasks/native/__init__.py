"""The package's compiled CPU kernels, in one room: the C++ sources (``csrc/``: the ON-LSTM's time loop and
DropConnect, the CRF's forward-backward), the loader of the one library they build into (:mod:`.library`), and one
Python face per op (:mod:`.onlstm`, :mod:`.crf`). The ON-LSTM (``encoders``) and the CRF (``modules``) both load
from here; neither reaches into the other. Plain torch, the lowest layer of DESIGN.md's order: it imports nothing of
the package.
"""

from .library import available, built_library, usable, why_not

__all__ = ["available", "built_library", "usable", "why_not"]
