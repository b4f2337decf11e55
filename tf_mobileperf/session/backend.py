"""What the monitor needs from the active Keras backend.

Keras 3 trains on TensorFlow, JAX or torch. Each reports running out of
memory its own way (TensorFlow's ``ResourceExhaustedError``, JAX's runtime
error with ``RESOURCE_EXHAUSTED``, torch's ``OutOfMemoryError`` or its CPU
allocator's ``RuntimeError``) and each waits for queued device work its own
way. This module names the active backend, says whether an error means out
of memory, and gives the call that waits for the device. It imports no
backend itself: it looks only at the modules the program has imported.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Words in an error's message that mean out of memory, for errors that have no type of their own.
_OOM_MESSAGES = ("RESOURCE_EXHAUSTED", "DefaultCPUAllocator: can't allocate memory", "CUDA out of memory")


#: The frameworks a program may train with, by their module names.
FRAMEWORKS = ("tensorflow", "torch", "jax")


def active() -> str:
    """The backend the program trains with, from what it imported (nothing is imported here).

    Returns:
        Keras's backend where the program imported Keras; else the framework among ``FRAMEWORKS`` it
        imported (``KERAS_BACKEND``'s where it imported several); else "numpy" (a plain loop).
    """
    keras = sys.modules.get("keras")
    if keras is not None:
        return keras.backend.backend()
    loaded = [name for name in FRAMEWORKS if name in sys.modules]
    wanted = os.environ.get("KERAS_BACKEND")
    if wanted in loaded:
        return wanted
    return loaded[0] if loaded else "numpy"


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory error of Python or of any Keras backend.

    Args:
        exc: The error raised.

    Returns:
        True for a ``MemoryError``, TensorFlow's ``ResourceExhaustedError``, torch's ``OutOfMemoryError``, and a
        ``RuntimeError`` or JAX runtime error whose message says so (``RESOURCE_EXHAUSTED``, ``CUDA out of memory``,
        torch's CPU allocator's "can't allocate memory").
    """
    if isinstance(exc, MemoryError):
        return True
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(exc, tf.errors.ResourceExhaustedError):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    runtime = type(exc).__name__ in ("XlaRuntimeError", "JaxRuntimeError") or isinstance(exc, RuntimeError)
    return runtime and any(words in str(exc) for words in _OOM_MESSAGES)


def device_sync() -> Callable[[], None] | None:
    """The call that waits for the active backend's queued GPU work; None on CPU.

    On CPU every backend runs a step's ops before the call returns, so there
    is nothing to wait for. JAX has no call that waits for all queued work;
    there a step ends when Keras has turned its logs into Python numbers
    (before any callback sees them), which waits for the step's loss.
    """
    name = active()
    framework = sys.modules.get(name)  # imported by the program (``active`` names no other)
    try:
        if name == "tensorflow" and framework is not None:
            gpus = framework.config.list_physical_devices("GPU")
            return framework.test.experimental.sync_devices if gpus else None
        if name == "torch" and framework is not None:
            return framework.cuda.synchronize if framework.cuda.is_available() else None
    except Exception as exc:  # a broken GPU runtime: steps are still timed, without the wait
        log.warning("mobileperf: cannot find how to wait for the %s device: %s", name, exc)
    return None
