"""Sequence models: the char-LSTM (Shakespeare), a small BERT-style masked LM,
and an encoder-decoder LSTM for translation (the paper's IWSLT15 NMT).

Each Keras model is named as its zoo entry ("lstm", "bert", "bert-base",
"nmt"): a run's report names the model by its Keras name, a sweep's rows by
the entry's, and the figures and the dashboard show one name for both."""

from __future__ import annotations

import keras
import numpy as np

from tf_mobileperf.zoo.base import ModelSpec

CHAR_VOCAB = 65  # distinct characters of tinyshakespeare


def build_char_lstm(seq_len: int, vocab: int = CHAR_VOCAB, units: int = 256) -> keras.Model:
    """The char-LSTM, named "lstm" as the zoo and the sweep's rows call it (its report carries that name).

    Args:
        seq_len: Characters per sample.
        vocab: Number of distinct characters (tinyshakespeare's 65 by default).
        units: Width of the LSTM layer.

    Returns:
        The compiled ``keras.Model``, which predicts the next character at each position (logits).
    """
    model = keras.Sequential(
        [
            keras.Input((seq_len,), dtype="int32"),
            keras.layers.Embedding(vocab, 64),
            keras.layers.LSTM(units, return_sequences=True),
            keras.layers.Dense(vocab),
        ],
        name="lstm",
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _chars(rng, n, seq_len):
    text = rng.integers(0, CHAR_VOCAB, (n, seq_len + 1)).astype(np.int32)
    return text[:, :-1], text[:, 1:]


def build_bert(
    seq_len: int, vocab: int = 8000, dim: int = 128, layers: int = 2, heads: int = 4, name: str = "bert"
) -> keras.Model:
    """A BERT-style encoder trained as a masked language model (every position predicted).

    Args:
        seq_len: Tokens per sample.
        vocab: Vocabulary size.
        dim: Width of the embeddings and of each encoder layer.
        layers: Number of encoder layers.
        heads: Attention heads per layer, each ``dim // heads`` wide.
        name: The Keras model's name.

    Returns:
        The compiled ``keras.Model`` (logits over ``vocab`` at each position).
    """
    tokens = keras.Input((seq_len,), dtype="int32")
    x = keras.layers.Embedding(vocab, dim)(tokens)
    positions = keras.layers.Embedding(seq_len, dim)(keras.ops.arange(seq_len)[None, :])
    x = x + positions
    for _ in range(layers):
        attention = keras.layers.MultiHeadAttention(heads, dim // heads)(x, x)
        x = keras.layers.LayerNormalization()(x + attention)
        ffn = keras.layers.Dense(dim, activation="gelu")(keras.layers.Dense(4 * dim, activation="gelu")(x))
        x = keras.layers.LayerNormalization()(x + ffn)
    model = keras.Model(tokens, keras.layers.Dense(vocab)(x), name=name)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def build_bert_base(seq_len: int) -> keras.Model:
    """BERT-base's shape (12 layers, 768 wide, 12 heads, 30522 tokens): the paper's SQuAD case.

    Args:
        seq_len: Tokens per sample.

    Returns:
        The compiled ``keras.Model`` named "bert-base" (``build_bert``'s).
    """
    return build_bert(seq_len, vocab=30522, dim=768, layers=12, heads=12, name="bert-base")


def _masked_tokens(rng, n, seq_len, vocab=8000, mask_id=1):
    labels = rng.integers(2, vocab, (n, seq_len)).astype(np.int32)
    tokens = np.where(rng.random((n, seq_len)) < 0.15, mask_id, labels).astype(np.int32)
    return tokens, labels


def build_nmt(seq_len: int, vocab: int = 8000, units: int = 256) -> keras.Model:
    """An encoder-decoder LSTM for translation: the encoder's final state starts the decoder.

    Args:
        seq_len: Tokens per source sentence and per decoder input.
        vocab: Vocabulary size, of source and target alike.
        units: Width of each LSTM.

    Returns:
        The compiled ``keras.Model`` named "nmt", with inputs ``source`` and ``target_in`` (the target shifted
        right) and logits over ``vocab`` at each target position.
    """
    source = keras.Input((seq_len,), dtype="int32", name="source")
    target_in = keras.Input((seq_len,), dtype="int32", name="target_in")
    _, h, c = keras.layers.LSTM(units, return_state=True)(keras.layers.Embedding(vocab, 128)(source))
    decoded = keras.layers.LSTM(units, return_sequences=True)(
        keras.layers.Embedding(vocab, 128)(target_in), initial_state=[h, c]
    )
    model = keras.Model([source, target_in], keras.layers.Dense(vocab)(decoded), name="nmt")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _pairs(rng, n, seq_len, vocab=8000):
    source = rng.integers(2, vocab, (n, seq_len)).astype(np.int32)
    target = rng.integers(2, vocab, (n, seq_len + 1)).astype(np.int32)
    return (source, target[:, :-1]), target[:, 1:]


CHAR_LSTM = ModelSpec("lstm", "RNN", build_char_lstm, _chars, 100, "tinyshakespeare (keras.utils.get_file)")
BERT = ModelSpec("bert", "Transformer", build_bert, _masked_tokens, 128, None)
BERT_BASE = ModelSpec("bert-base", "Transformer", build_bert_base, _masked_tokens, 384, None)
NMT = ModelSpec("nmt", "RNN", build_nmt, _pairs, 30, None)
