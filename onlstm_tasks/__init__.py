"""ON-LSTM encoders and Lightning task models for NER and aspect-level sentiment.

``from onlstm_tasks import load`` gives the Python API (:func:`onlstm_tasks.api.load`); it is imported on first use,
so ``import onlstm_tasks`` (and every lower layer) stays free of Lightning.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "load":
        from onlstm_tasks.api import load

        return load
    raise AttributeError(f"module 'onlstm_tasks' has no attribute {name!r}")
