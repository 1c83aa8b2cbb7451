"""Data: input formats -> ``Example``s -> vocabularies -> padded batches, and the Lightning data modules.

``readers/`` (NER) and ``absa_readers/`` (aspect sentiment) hold the per-format readers and each task's
formats for the one split loader ``splits.load_splits`` (``split_files`` finds which files make up which split;
``lm_text`` adds the text rows of the language models); ``tags``, ``vocab``, ``features``, ``batching`` and
``sampler`` are Lightning-free building blocks that ``modules/`` and ``tasks/`` may import (``batching.IGNORE``,
``vocab.EOS``, ``tags.parse_label``, ...); ``base.TaskDataModule`` is the data-module skeleton that ``ner``,
``absa`` (through ``labelled.LabelledDataModule``, the options they share) and ``lm`` extend with what differs. By the layer order (DESIGN.md) this package may import only the
layers below it: ``encoders``, ``interaction``, ``trees``, ``errors`` and ``sample_data``; never ``modules``,
``embedders``, ``metrics``, ``tasks``, ``callbacks``, ``cli`` or ``probing``.
"""
