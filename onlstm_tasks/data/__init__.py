"""Data: input formats -> ``Example``s -> vocabularies -> padded batches, and the Lightning data modules, by task.

``core/`` is what the tasks share (examples, tags, vocabularies, batches, the sampler and loader, the one split
loader, the data-module skeleton ``core.base.TaskDataModule``); each task has a room with its data module and its
readers: ``ner/`` (``ner.NERDataModule``, ``ner/readers/``), ``absa/`` (``absa.AspectSentimentDataModule``,
``absa/readers/``) and ``lm/`` (``lm.LanguageModelDataModule``, ``lm/text.py``). A room imports ``core`` (the LM's
text rows also read the NER formats); ``core`` imports no room.

By the layer order (DESIGN.md) this package may import only the layers below it: ``encoders``, ``interaction``,
``trees``, ``native``, ``errors`` and ``sample_data``; never ``modules``, ``embedders``, ``metrics``, ``tasks``,
``callbacks``, ``cli`` or ``probing``.
"""
