"""Probing trained checkpoints for trees: the top of the package's layer order, beside :mod:`onlstm_tasks.cli`.

* :mod:`.probe`: :class:`~onlstm_tasks.probing.probe.EncoderProbe`, a task model's ON-LSTM distances and master
  gates on raw token lists;
* :mod:`.loading`: :func:`~onlstm_tasks.probing.loading.load_probe`, an EncoderProbe from a checkpoint file;
* :mod:`.plots`: master-gate heatmaps and the induced tree of one sentence (matplotlib, optional);
* :mod:`.cli`: the ``onlstm-trees`` console script (UF1 against gold trees, gate plots).

It may import every layer below it (tasks, data, encoders, trees, errors); nothing in the package imports it.
This ``__init__`` imports none of its modules, so ``onlstm-trees eval --baseline`` starts without the task models
(and Lightning), which :mod:`.loading` loads only when a checkpoint is read.
"""
