"""Task models: the LightningModules ``NERTagger``, ``AspectSentimentClassifier`` and ``LanguageModel``.

Each composes an embedder, an encoder and a network from :mod:`onlstm_tasks.modules`, and adds what Lightning needs:
the training/validation/test/predict steps, metrics, optimisers, checkpoint loading (:mod:`.loading`) and the
initialisation of a task encoder from a language model (:mod:`.lm_init`). By the layer order (DESIGN.md) it may
import every layer below it (modules, embedders, metrics, data, encoders, interaction, trees, errors); only
``cli`` and ``probing`` sit above it, and it never imports them.
"""
