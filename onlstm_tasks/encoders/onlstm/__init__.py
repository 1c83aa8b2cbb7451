"""The ON-LSTM (Ordered Neurons LSTM, Shen et al., ICLR 2019), one file per job.

From the bottom up: :mod:`.equations` (the gate layout, cumax and the master gates, the cell update: written once),
:mod:`.native` (loads the C++ kernels of ``csrc/onlstm_cpu.cpp``, built at install) and :mod:`.dropconnect`
(DropConnect on weights, also used by the library LSTM/GRU); :mod:`.runs` (runs of steps over a padded batch),
:mod:`.steps_torch` (a step's element-wise work in PyTorch), :mod:`.layer_pass` (one layer's forward and backward
time loop, compiled or PyTorch's), :mod:`.batch_plan` (the batch layout around it), :mod:`.layer_op` (the layer as
the operator ``torch.ops.onlstm_tasks.onlstm_layer``); :mod:`.cell`
(:class:`ONLSTMCell`: parameters, the fast layer run, and a one-step ``RecurrentCell`` method), :mod:`.reference`
(the plain reference cell, the test oracle), :mod:`.encoder` (the public :class:`ONLSTM`) and
:mod:`.master_gates` (the gates themselves, for inspection).

It may import torch and the lower modules of :mod:`onlstm_tasks.encoders` (``base``, ``dropout``, ``cell_stack``,
``independent_directions``), nothing above ``encoders`` and never Lightning. ``onlstm_tasks.encoders.onlstm.ONLSTM``
(the path of the module this package replaced) stays valid for YAML configs and checkpoints.
"""

from .cell import ONLSTMCell
from .encoder import ONLSTM
from .equations import MASTER_INPUT_VARIANTS, cumax, master_input_gate, onlstm_update
from .master_gates import MasterGates, master_gates
from .reference import ReferenceONLSTMCell, reference_encode

__all__ = ["ONLSTM", "ONLSTMCell", "ReferenceONLSTMCell", "MasterGates", "master_gates", "MASTER_INPUT_VARIANTS",
           "cumax", "master_input_gate", "onlstm_update", "reference_encode"]
