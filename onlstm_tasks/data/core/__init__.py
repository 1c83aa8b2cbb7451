"""What every task's data shares: ``Example``s (:mod:`.examples`), tags (:mod:`.tags`), vocabularies and token
features (:mod:`.vocab`, :mod:`.features`, :mod:`.vector_file`), batches (:mod:`.batching`, :mod:`.packed`), the
bucketing sampler and the resumable loader (:mod:`.sampler`, :mod:`.resumable_loader`), the one split loader
(:mod:`.splits`, with :mod:`.data_files`, :mod:`.sniff` and the readers' shared helpers :mod:`.reading`), the
checks of inputs (:mod:`.checks`, :mod:`.checkpoint_file`), gold trees (:mod:`.gold_trees`), and the data-module
skeleton (:mod:`.base`, :mod:`.labelled`, :mod:`.common`).

This ``__init__`` imports none of them: ``modules/`` and ``embedders/`` import the Lightning-free building blocks
(``batching.TokenBatch``, ``vocab.PAD``, ``tags.parse_label``, ...) without pulling in Lightning."""
