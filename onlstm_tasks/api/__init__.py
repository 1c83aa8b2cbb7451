"""The Python API: ``load`` a trained model (checkpoint, ``save_pretrained`` folder or Hub repo id) as a predictor
(:class:`Tagger`, :class:`AspectClassifier`, :class:`LanguageModelPredictor`), and ``export`` a checkpoint as a
folder."""

from onlstm_tasks.api.export import export
from onlstm_tasks.api.loading import load, predictor_for
from onlstm_tasks.api.predictors import AspectClassifier, LanguageModelPredictor, Predictor, Record, Tagger

__all__ = ["AspectClassifier", "LanguageModelPredictor", "Predictor", "Record", "Tagger", "export", "load",
           "predictor_for"]
