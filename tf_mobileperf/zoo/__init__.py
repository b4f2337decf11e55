"""The seed's model families, built from Keras layers and keras.applications.

Every entry builds a compiled model (``weights=None``: nothing is downloaded)
and gives synthetic batches of the right shapes, so a sweep runs anywhere;
``real_data`` names a Keras/TF loader where one exists. Image models take an
input size (CIFAR-10's 32 or ImageNet's 224); the seed's TX2 out-of-memory
failures only show at full size.

    >>> spec = get("cnn")
    >>> model = spec.build(input_size=32)                  # doctest: +SKIP
    >>> x, y = spec.synthetic(batch_size=8, batches=4)     # doctest: +SKIP
"""

from __future__ import annotations

from .base import ModelSpec
from .sequence import BERT, BERT_BASE, CHAR_LSTM, NMT
from .vision import CNN, DCGAN, RESNET50, RESNET152, VGG19
from .rl import DQN

MODELS: dict[str, ModelSpec] = {m.name: m for m in (CNN, RESNET50, RESNET152, VGG19, CHAR_LSTM, DQN, DCGAN, BERT, BERT_BASE, NMT)}


def get(name: str) -> ModelSpec:
    """The zoo entry called ``name``; ValueError naming the known ones otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None


__all__ = ["MODELS", "ModelSpec", "get"]
