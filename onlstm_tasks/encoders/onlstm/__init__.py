"""The ON-LSTM (Ordered Neurons LSTM, Shen et al., ICLR 2019): the oracle, the faster back ends, the public layer.

- The oracle: :mod:`.equations` (the gate layout, cumax and the master gates, the cell update: written once) and
  :mod:`.reference` (the plain reference cell, which imports only the equations). Every back end is tested against
  it.
- The back ends (``backends/``, one room each), behind one interface and one table (:mod:`.registry`, which alone
  names them and chooses: :func:`.registry.resolve`), their tuning constants in one module (:mod:`.tuning`):
  ``backends/loop/`` (a time loop over length-sorted rows: :mod:`~.backends.loop.plan`,
  :mod:`~.backends.loop.runs`, :mod:`~.backends.loop.layer_pass`, and two steps objects, compiled C++
  (:mod:`~.backends.loop.steps_compiled`, kernels in :mod:`onlstm_tasks.native`) or PyTorch
  (:mod:`~.backends.loop.steps_torch`)) and ``backends/triton/`` (:mod:`~.backends.triton.kernels`, each step split
  over many Triton programs, launched by :mod:`~.backends.triton.launcher`).
- The layer: :mod:`.layer_op` (the operator ``torch.ops.onlstm_tasks.onlstm_layer``), :mod:`.cell`
  (:class:`ONLSTMCell`: parameters, the fast layer run, a one-step ``RecurrentCell`` method) and :mod:`.encoder`
  (the public :class:`ONLSTM`; DropConnect on its weights: :mod:`onlstm_tasks.encoders.dropconnect`). The master
  gates themselves, for inspection, are :mod:`onlstm_tasks.probing.master_gates`.

A new back end: docs/guide.md, "Adding a back end". It may import torch, :mod:`onlstm_tasks.native` and the lower
modules of :mod:`onlstm_tasks.encoders` (``base``, ``dropout``, ``dropconnect``, ``cell_stack``,
``independent_directions``), nothing above ``encoders`` and never Lightning. ``onlstm_tasks.encoders.onlstm.ONLSTM``
(the path of the module this package replaced) stays valid for YAML configs and checkpoints.
"""

from .cell import ONLSTMCell
from .encoder import ONLSTM
from .equations import MASTER_INPUT_VARIANTS, cumax, master_input_gate, onlstm_update
from .reference import ReferenceONLSTMCell, reference_encode

__all__ = ["ONLSTM", "ONLSTMCell", "ReferenceONLSTMCell", "MASTER_INPUT_VARIANTS",
           "cumax", "master_input_gate", "onlstm_update", "reference_encode"]
