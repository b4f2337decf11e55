"""The paper's model families, built from Keras layers and keras.applications.

Every entry builds a compiled model (``weights=None``: nothing is downloaded)
and gives synthetic batches of the right shapes, so a sweep runs anywhere;
``real_data`` names a Keras/TF loader where one exists. Image models take an
input size (CIFAR-10's 32 or ImageNet's 224); the paper's TX2 out-of-memory
failures only show at full size. ``check_input_size`` says, without Keras,
whether a model takes a size (``shapes``: the CNN's windows need at least 10).

    >>> spec = get("cnn")
    >>> model = spec.build(input_size=32)                  # doctest: +SKIP
    >>> x, y = spec.synthetic(batch_size=8, batches=4)     # doctest: +SKIP
"""

from __future__ import annotations

from tf_mobileperf.zoo.base import ModelSpec
from tf_mobileperf.zoo.shapes import check_input_size

#: The entries' names, known without importing Keras (the command line's help and checks).
NAMES = ("cnn", "resnet50", "resnet152", "vgg19", "lstm", "dqn", "dcgan", "bert", "bert-base", "nmt")


def _models() -> dict[str, ModelSpec]:
    from tf_mobileperf.zoo.rl import DQN
    from tf_mobileperf.zoo.sequence import BERT, BERT_BASE, CHAR_LSTM, NMT
    from tf_mobileperf.zoo.vision import CNN, DCGAN, RESNET50, RESNET152, VGG19

    return {m.name: m for m in (CNN, RESNET50, RESNET152, VGG19, CHAR_LSTM, DQN, DCGAN, BERT, BERT_BASE, NMT)}


def __getattr__(name: str):
    if name == "MODELS":  # built on first use: the entries import Keras
        return _models()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> ModelSpec:
    """The zoo entry called ``name`` (importing Keras).

    Args:
        name: The entry's name, one of ``NAMES`` ("cnn", "resnet50", ...).

    Returns:
        The entry's ``ModelSpec``.

    Raises:
        ValueError: ``name`` is not in ``NAMES`` (the message names the known ones).
    """
    if name not in NAMES:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(NAMES)}")
    return _models()[name]


__all__ = ["MODELS", "NAMES", "ModelSpec", "check_input_size", "get"]
