"""Token embedders: ``TokenBatch`` -> ``[B, T, output_size]``, zeros at padded positions.

Vocabulary-dependent arguments (``vocab`` of :class:`WordEmbedding`, ``num_chars`` of the char encoders)
come first and are passed by code; everything else is a plain config value. No Lightning here. By the layer order
(DESIGN.md) it may import data (batches, vocabularies), encoders, interaction, trees and errors; never modules,
metrics (its siblings), tasks, callbacks, cli or probing.
"""

from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.embedders.char_cnn import CharCNN
from onlstm_tasks.embedders.char_lstm import CharLSTM
from onlstm_tasks.embedders.concat import ConcatEmbedder
from onlstm_tasks.embedders.word import WordEmbedding

__all__ = ["CharCNN", "CharLSTM", "ConcatEmbedder", "TokenEmbedder", "TransformerEmbedding", "WordEmbedding"]


def __getattr__(name: str):
    # transformers is heavy to import: load it only when the transformer embedder is asked for
    if name == "TransformerEmbedding":
        from onlstm_tasks.embedders.transformer import TransformerEmbedding

        return TransformerEmbedding
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
