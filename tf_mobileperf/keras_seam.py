"""The one place ``tf_mobileperf`` puts wraps on Keras's objects during ``fit``.

A callback's hooks are only called while all goes well: an error in the
train function, in validation or in another callback leaves ``fit`` without
``on_train_end``. So that the measurement still ends with the error, a
``FitSeam`` puts, for one ``fit``, a guard in place of

* ``model.train_function`` (errors in a step; an out-of-memory error may be
  answered with a return value, ``on_oom="stop"``; the end of the data);
* ``model.evaluate`` (validation inside ``fit``);
* the hooks of the ``keras.callbacks.CallbackList`` that holds the callback
  (errors in other callbacks).

A guard calls the original and, on an error, hands it to each callback that
subscribed to it, then lets it go on (or returns what every subscriber
answered instead). It holds its subscribers weakly: no callback is kept alive
by a guard. Two callbacks in one ``fit`` share the guards; the last one to
leave puts the original back, and only if the attribute still holds the
guard: a wrap someone else put on top is left in place (with a warning), and
the guard inside it then only passes calls through.

Keras hands a callback no handle on the list that calls it. The seam finds
it as the ``CallbackList`` whose ``callbacks`` list holds the callback (from
the garbage collector's referrers of the callback, no frame inspection). If
a Keras version keeps its callbacks otherwise, no list is found: errors in
other callbacks then end the measurement at the next ``fit``, when the
callback is garbage collected, or at exit, as errors in ``fit``'s own code do.
"""

from __future__ import annotations

import gc
import logging
import types
import weakref

import keras

log = logging.getLogger(__name__)

#: Hooks of Keras's CallbackList that run inside ``fit``; an error in any of them ends the measurement.
LIST_HOOKS = (
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_batch_end",
    "on_test_begin",
    "on_test_end",
    "on_test_batch_begin",
    "on_test_batch_end",
    "on_train_end",
)

#: What an error handler returns to let the error go on.
PROPAGATE = object()

#: ``where`` given to a subscriber whose answer was overruled: the error leaves ``fit``.
LEAVES_FIT = "fit"


class Guard:
    """Stands in for ``owner.<name>``: calls the original, hands an error to the subscribers."""

    __slots__ = ("owner", "name", "original", "had_own", "subscribers", "__weakref__")

    def __init__(self, owner, name: str, original, had_own: bool):
        self.owner, self.name, self.original, self.had_own = owner, name, original, had_own
        self.subscribers: list[weakref.WeakMethod] = []

    def __call__(self, *args, **kwargs):
        try:
            return self.original(*args, **kwargs)
        except BaseException as exc:
            instead = self._answer(exc, args)
            if instead is PROPAGATE:
                raise
            return instead

    def _answer(self, exc: BaseException, args: tuple):
        answered = []
        for ref in list(self.subscribers):  # a handler may leave (undo) while we go through them
            handler = ref()
            if handler is not None:
                answered.append((handler, handler(self.name, exc, args)))
        instead = [answer for _, answer in answered if answer is not PROPAGATE]
        if answered and len(instead) == len(answered):
            return instead[0]
        for handler, answer in answered:
            if answer is not PROPAGATE:  # another subscriber lets the error go on: it ends fit for all
                handler(LEAVES_FIT, exc, args)
        return PROPAGATE

    def __repr__(self) -> str:
        return f"<tf_mobileperf guard of {type(self.owner).__name__}.{self.name}>"


class FitSeam:
    """The guards one callback subscribed to for one ``fit``; ``undo()`` leaves them.

    ``on_error(where, exc, args)`` is a bound method of the callback (held
    weakly); it returns PROPAGATE, or what the guarded call returns instead.
    """

    def __init__(self, on_error: types.MethodType):
        self._on_error = weakref.WeakMethod(on_error)
        self._guards: list[weakref.ref] = []  # weakly: a guard nothing else holds has nothing to undo
        self.callback_lists = 0  # how many CallbackLists holding the callback were guarded
        # The callback's end undoes what is left (a fit that no guard saw fail, then the callback dropped).
        self._finalizer = weakref.finalize(on_error.__self__, _leave, self._guards, self._on_error)
        self._finalizer.atexit = False

    def install(self, model, callback) -> None:
        """Guards ``model``'s train function and ``evaluate``, and the callback lists holding ``callback``.

        Args:
            model: The Keras model being fit.
            callback: The callback whose ``CallbackList`` hooks (``LIST_HOOKS``) are guarded; where no list is
                found, only the model is (``callback_lists`` stays 0).
        """
        self.guard(model, "train_function")
        self.guard(model, "evaluate")
        for callback_list in callback_lists_holding(callback):
            self.callback_lists += 1
            for hook in LIST_HOOKS:
                self.guard(callback_list, hook)
        if not self.callback_lists:
            log.debug("no keras.callbacks.CallbackList holds %r: errors in other callbacks are seen late", callback)

    def guard(self, owner, name: str) -> None:
        """Subscribes to the guard of ``owner.<name>``, putting one there if there is none.

        Args:
            owner: The object whose attribute is guarded (a model, a ``CallbackList``).
            name: The attribute's name; where ``owner`` has none (or it is None), nothing is guarded.
        """
        current = getattr(owner, name, None)
        if current is None:
            return
        if not (isinstance(current, Guard) and current.owner is owner and vars(owner).get(name) is current):
            current = Guard(owner, name, current, had_own=name in vars(owner))
            setattr(owner, name, current)
        current.subscribers.append(self._on_error)
        self._guards.append(weakref.ref(current))

    def undo(self) -> list[str]:
        """Leaves every guard; returns the wraps left in place because something else replaced them."""
        self._finalizer.detach()
        return _leave(self._guards, self._on_error)


def _leave(guards: list[weakref.ref], subscriber: weakref.WeakMethod) -> list[str]:
    """Takes ``subscriber`` off ``guards`` (last first); a guard nobody else uses goes."""
    left_in_place = []
    while guards:
        guard = guards.pop()()
        if guard is None:
            continue
        guard.subscribers[:] = [s for s in guard.subscribers if s is not subscriber and s() is not None]
        if guard.subscribers:
            continue  # another callback of this fit still uses it: the last one puts the original back
        owner, name = guard.owner, guard.name
        current = vars(owner).get(name)
        if current is guard:
            if guard.had_own:
                setattr(owner, name, guard.original)
            else:
                delattr(owner, name)
        elif current is not guard.original:
            where = f"{type(owner).__name__}.{name}"
            left_in_place.append(where)
            log.warning(
                "%s was replaced during fit by %r; it is left as it is (the measurement's guard "
                "inside it, if any, now only passes calls through)",
                where,
                current,
            )
    return left_in_place


def callback_lists_holding(callback) -> list:
    """The ``keras.callbacks.CallbackList`` objects whose ``callbacks`` hold ``callback``.

    Args:
        callback: The callback to look for, by identity, among the garbage collector's referrers.

    Returns:
        Each such list once; empty where none is found.
    """
    holders = [r for r in gc.get_referrers(callback) if isinstance(r, list) and any(c is callback for c in r)]
    if not holders:
        return []
    found, dicts = [], []
    for referrer in gc.get_referrers(*holders):
        if isinstance(referrer, keras.callbacks.CallbackList):
            found.append(referrer)
        elif isinstance(referrer, dict):
            dicts.append(referrer)  # an instance's __dict__, where Python keeps it apart from the instance
    if dicts:
        found += [r for r in gc.get_referrers(*dicts) if isinstance(r, keras.callbacks.CallbackList)]
    return list({id(c): c for c in found if any(c.callbacks is h for h in holders)}.values())
