"""The ON-LSTM layer's back ends, one room each: ``loop/`` (``compiled`` and ``torch``: a time loop over
length-sorted rows, two steps objects) and ``triton/`` (``triton``: Triton kernels that split each step over many
programs). :mod:`..registry` holds the table and chooses; nothing here names a back end but its own."""
