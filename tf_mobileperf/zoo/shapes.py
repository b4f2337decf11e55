"""The smallest input each zoo model takes, known without Keras, so a sweep refuses a size before any child runs.

A convolution or pooling window without padding ("valid") shrinks a side
from n to (n - size) // stride + 1; one with "same" padding to
ceil(n / stride). Run backwards from a side of 1 through a model's windows,
that gives the smallest side it takes (``smallest_side``). The CNN and the
DQN are built from the windows declared here, so the rule is their own.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Window:
    """A square window over an image: its side, stride and padding, and the filters of a convolution (None: a
    max pooling)."""

    size: int
    stride: int = 1
    filters: int | None = None
    same: bool = False

    def smallest_input(self, output: int) -> int:
        """The smallest side in that gives ``output`` out.

        Args:
            output: The side out of the window, in pixels.

        Returns:
            The side in, in pixels.
        """
        return (output - 1) * self.stride + (1 if self.same else self.size)

    def layer(self, **kwargs: Any):
        """The Keras layer (Conv2D or MaxPooling2D) with this window.

        Args:
            **kwargs: Passed on to the layer (``activation``, ``name``, ...).

        Returns:
            A new ``keras.layers.Conv2D``, or ``MaxPooling2D`` where ``filters`` is None.
        """
        import keras

        padding = "same" if self.same else "valid"
        if self.filters is None:
            return keras.layers.MaxPooling2D(self.size, self.stride, padding=padding, **kwargs)
        return keras.layers.Conv2D(self.filters, self.size, self.stride, padding=padding, **kwargs)


def smallest_side(windows: tuple[Window, ...]) -> int:
    """The smallest image side that leaves at least one pixel after every window.

    Args:
        windows: The windows, in the order the image goes through them.

    Returns:
        The side in pixels.
    """
    side = 1
    for window in reversed(windows):
        side = window.smallest_input(side)
    return side


#: The paper's small CNN: 3x3 convolutions and 2x2 poolings, no padding.
CNN_WINDOWS = (Window(3, filters=32), Window(2, 2), Window(3, filters=64), Window(2, 2))
#: The DQN's convolutions over 84x84 frames (Mnih et al. 2015), no padding.
DQN_WINDOWS = (Window(8, 4, filters=32), Window(4, 2, filters=64), Window(3, 1, filters=64))


@dataclasses.dataclass(frozen=True)
class InputRule:
    """The input sizes a model takes: at least ``minimum``, a multiple of ``multiple``, and why."""

    minimum: int
    why: str
    multiple: int = 1

    def problem(self, size: int) -> str | None:
        """Why ``size`` does not fit; None if it does.

        Args:
            size: The input size (image side in pixels).

        Returns:
            The reason, worded to follow "input size N for MODEL" ("is too small: ..."); None if it fits.
        """
        if size < self.minimum:
            return f"is too small: {self.why}, so it takes at least {self.minimum}"
        if size % self.multiple:
            return f"does not fit: {self.why}, so it must be a multiple of {self.multiple}"
        return None


def _windows_rule(windows: tuple[Window, ...]) -> InputRule:
    kinds = "convolution and pooling" if any(w.filters is None for w in windows) else "convolution"
    sides = ", ".join(f"{w.size}x{w.size}" + (f" stride {w.stride}" if w.stride > 1 else "") for w in windows)
    return InputRule(
        smallest_side(windows), f"its {kinds} windows ({sides}, no padding) leave no pixel of a smaller side"
    )


_APPLICATION = InputRule(32, "keras.applications builds it for images of at least 32x32 (it halves the side 5 times)")
#: Model name -> the input sizes it takes (a model not here takes any size >= 1: sequence lengths).
RULES = {
    "cnn": _windows_rule(CNN_WINDOWS),
    "dqn": _windows_rule(DQN_WINDOWS),
    "resnet50": _APPLICATION,
    "resnet152": _APPLICATION,
    "vgg19": _APPLICATION,
    "dcgan": InputRule(
        4,
        "its generator doubles a side of size // 4 twice, and the discriminator compares its images with the real ones",
        multiple=4,
    ),
}


def check_input_size(model: str, size: int | None) -> None:
    """Checks, without Keras, that ``model`` takes input size ``size``.

    Args:
        model: A zoo entry's name; one not in ``RULES`` takes any size.
        size: The image side (pixels) or sequence length; None: the model's own default, never refused.

    Raises:
        ValueError: ``model`` cannot take ``size`` (one line, saying why).
    """
    rule = RULES.get(model)
    problem = rule.problem(size) if rule is not None and size is not None else None
    if problem:
        raise ValueError(f"input size {size} for {model} {problem}")
