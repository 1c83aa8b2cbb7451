"""ON-LSTM encoders and Lightning task models for NER and aspect-level sentiment."""

__version__ = "0.1.0"
