"""Probing trained checkpoints for trees: the top of the package's layer order, beside :mod:`onlstm_tasks.cli`.

* :mod:`.probe`: :class:`~onlstm_tasks.probing.probe.EncoderProbe`, a task model's ON-LSTM distances and master
  gates on raw token lists;
* :mod:`.loading`: :func:`~onlstm_tasks.probing.loading.load_probe`, an EncoderProbe from a checkpoint file;
* :mod:`.plots`: master-gate heatmaps and the induced tree of one sentence (matplotlib, optional);
* :mod:`.scoring`: gold trees (PTB files, OntoNotes-schema datasets) and the UF1 of distances per layer;
* :mod:`.tree_monitor`: :class:`~onlstm_tasks.probing.tree_monitor.TreeF1Monitor`, a Lightning callback logging
  that UF1 at every validation (so a checkpoint can be chosen on validation trees);
* :mod:`.cli`: the ``onlstm-trees`` console script (UF1 against gold trees, gate plots).

It may import every layer below it (tasks, data, encoders, trees, errors); nothing in the package imports it (configs name the callback
by its ``class_path``).
This ``__init__`` imports none of its modules, so ``onlstm-trees eval --baseline`` starts without the task models
(and Lightning), which :mod:`.loading` loads only when a checkpoint is read.
"""
