"""The plugin's HTTP plumbing: a route answers JSON (or a download) and turns every failure into a 4xx naming it.

A route handler parses its request and returns data; ``route`` writes it out. What each route takes and
answers is written up in docs/http_api.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from urllib.parse import quote

from tensorboard import errors
from tensorboard.backend import http_util
from werkzeug import wrappers

from tf_mobileperf.format import reader

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Download:
    """A handler's answer that is a file to save, not JSON to show."""

    body: bytes
    filename: str


def route(fn):
    """Wraps a handler: JSON (or a Download) out; client errors and broken files as 4xx.

    Args:
        fn: The handler, ``fn(self, request)``, returning JSON-serializable data or a ``Download``.

    Returns:
        A werkzeug application method ``handler(self, request)`` that answers 405 to anything but GET/HEAD, the
        ``PublicError``'s own code, 403 for a path outside the logdir, 404 for a missing file, 422 for unreadable data.
    """

    @wrappers.Request.application
    def handler(self, request):
        if request.method not in ("GET", "HEAD"):  # no route writes
            return error(request, "only GET is served", 405)
        try:
            answer = fn(self, request)
            if isinstance(answer, Download):
                response = http_util.Respond(request, answer.body, "application/json")
                response.headers["Content-Disposition"] = f'attachment; filename="{quote(answer.filename)}"'
                return response
            body = json.dumps(answer, allow_nan=False)  # NaN from a corrupt file is not JSON
        except errors.PublicError as exc:
            return error(request, str(exc), exc.http_code)
        except reader.OutsideLogdir as exc:
            return error(request, str(exc), 403)
        except FileNotFoundError as exc:
            return error(request, str(exc), 404)
        except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
            log.warning("mobileperf: %s: %s", request.path, exc)
            return error(request, f"unreadable data: {exc}", 422)
        return http_util.Respond(request, body, "application/json")

    return handler


def error(request, message: str, status: int):
    """A JSON response ``{"error": message}`` with HTTP status ``status``.

    Args:
        request: The werkzeug request being answered.
        message: The error text the client is shown.
        status: The HTTP status code.

    Returns:
        The werkzeug response.
    """
    return http_util.Respond(request, {"error": message}, "application/json", code=status)


def number(request, name: str, default: float | None = None) -> float | None:
    """The query parameter ``name`` of ``request`` as a finite float.

    Args:
        request: The werkzeug request.
        name: The query parameter's name.
        default: What to return where the parameter is absent or empty.

    Returns:
        The parameter's value, or ``default``.

    Raises:
        errors.InvalidArgumentError: The parameter is not a number or not finite (a 400 to the client).
    """
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise errors.InvalidArgumentError(f"parameter {name!r} must be a number, got {raw[:40]!r}") from None
    if not math.isfinite(value):
        raise errors.InvalidArgumentError(f"parameter {name!r} must be finite")
    return value
