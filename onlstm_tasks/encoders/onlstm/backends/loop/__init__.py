"""The ``compiled`` and ``torch`` back ends: one loop (:mod:`.backend`, :mod:`.plan`, :mod:`.layer_pass`,
:mod:`.runs`) over two steps objects (:mod:`.steps_compiled`, :mod:`.steps_torch`)."""
