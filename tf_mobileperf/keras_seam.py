"""Every wrap ``tf_mobileperf`` puts on Keras's objects during ``fit``.

``FitSeam`` replaces, for one ``fit``, the model's ``train_function`` and
``evaluate`` and the hooks of the callback list by calls that hand an error
to the callback before it goes on, and puts the originals back.
"""

from __future__ import annotations

import sys
from typing import Callable

import keras

#: Hooks of Keras's CallbackList that run inside ``fit``; an error in any of them ends the measurement.
LIST_HOOKS = ("on_epoch_begin", "on_epoch_end", "on_train_batch_begin", "on_train_batch_end", "on_batch_end",
              "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end", "on_train_end")

#: What an error handler returns to let the error go on.
PROPAGATE = object()


class FitSeam:
    """The wraps of one ``fit``; ``undo()`` puts the originals back."""

    def __init__(self, on_error: Callable):
        self._on_error = on_error  # (where, exc, args) -> PROPAGATE or what the call returns instead
        self._restore: list = []

    def install(self, model, callback, caller_depth: int = 2) -> None:
        self.wrap(model, "train_function")
        self.wrap(model, "evaluate")
        callback_list = sys._getframe(caller_depth).f_locals.get("self")  # the CallbackList calling the hook
        if isinstance(callback_list, keras.callbacks.CallbackList) and callback in callback_list.callbacks:
            for hook in LIST_HOOKS:
                self.wrap(callback_list, hook)

    def wrap(self, owner, name: str) -> None:
        """Replaces ``owner.name`` by a call that hands an error to the handler."""
        original = getattr(owner, name, None)
        if original is None:
            return
        shadowed = name in vars(owner)
        on_error = self._on_error

        def guarded(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            except BaseException as exc:
                instead = on_error(name, exc, args)
                if instead is PROPAGATE:
                    raise
                return instead

        setattr(owner, name, guarded)
        self._restore.append(lambda: setattr(owner, name, original) if shadowed else delattr(owner, name))

    def undo(self) -> None:
        for undo in reversed(self._restore):
            undo()
        self._restore = []
