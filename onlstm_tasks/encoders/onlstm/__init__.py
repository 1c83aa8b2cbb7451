"""The ON-LSTM (Ordered Neurons LSTM, Shen et al., ICLR 2019), one file per job.

From the bottom up: :mod:`.equations` (the gate layout, cumax and the master gates, the cell update: written once),
:mod:`.reference` (the plain reference cell, the test oracle: it imports only the equations), :mod:`.native`
(loads the C++ kernels of ``csrc/onlstm_cpu.cpp``, built at install) and :mod:`.dropconnect` (DropConnect on
weights, also used by the library LSTM/GRU); the back ends of the layer pass, behind one interface
(:mod:`.backends`): :mod:`.backend_loop` (:mod:`.runs`, :mod:`.steps_torch`, :mod:`.layer_pass`,
:mod:`.batch_plan`: a time loop over length-sorted rows, compiled or PyTorch's) and :mod:`.backend_triton`
(:mod:`.triton_kernels`: each step split over many Triton programs); :mod:`.layer_op` (the layer as the operator
``torch.ops.onlstm_tasks.onlstm_layer``); :mod:`.cell` (:class:`ONLSTMCell`: parameters, the fast layer run, and a
one-step ``RecurrentCell`` method) and :mod:`.encoder` (the public :class:`ONLSTM`). The master gates themselves,
for inspection, are :mod:`onlstm_tasks.probing.master_gates`.

It may import torch and the lower modules of :mod:`onlstm_tasks.encoders` (``base``, ``dropout``, ``cell_stack``,
``independent_directions``), nothing above ``encoders`` and never Lightning. ``onlstm_tasks.encoders.onlstm.ONLSTM``
(the path of the module this package replaced) stays valid for YAML configs and checkpoints.
"""

from .cell import ONLSTMCell
from .encoder import ONLSTM
from .equations import MASTER_INPUT_VARIANTS, cumax, master_input_gate, onlstm_update
from .reference import ReferenceONLSTMCell, reference_encode

__all__ = ["ONLSTM", "ONLSTMCell", "ReferenceONLSTMCell", "MASTER_INPUT_VARIANTS",
           "cumax", "master_input_gate", "onlstm_update", "reference_encode"]
