"""The tab's ES module: the built dashboard bundle, or a notice where it is missing.

TensorBoard imports the module the plugin serves and calls its ``render()``;
a 404 there leaves a blank frame. Where ``static/index.js`` is absent (a
checkout nobody ran ``make`` in, a broken install) or unreadable, the plugin
serves instead a small module whose ``render()`` says so in words and says
how to fix it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)

MISSING = "the dashboard's frontend bundle is missing: run `make` or reinstall tf-mobileperf"


def notice_module(message: str) -> bytes:
    """An ES module whose render() writes ``message`` into the page as text.

    Args:
        message: The notice's text.

    Returns:
        The module's source, UTF-8 encoded.
    """
    return (
        "export async function render() {\n"
        "  const notice = document.createElement('p');\n"
        "  notice.id = 'missing-bundle';\n"
        "  notice.style.cssText = 'font: 14px Roboto, sans-serif; color: #c62828; margin: 16px;';\n"
        f"  notice.textContent = {json.dumps(message)};\n"
        "  document.body.append(notice);\n"
        "}\n"
    ).encode()


def frontend_module(bundle: Path) -> bytes:
    """The bundle's bytes, or a notice module naming why it cannot be served.

    Args:
        bundle: Path of the built ``static/index.js``.

    Returns:
        The bundle's bytes; where it is missing or unreadable, a ``notice_module`` saying so (and logs a warning).
    """
    try:
        return bundle.read_bytes()
    except FileNotFoundError:
        log.warning("%s is missing: the MobilePerf tab shows a notice instead of the dashboard", bundle)
        return notice_module(MISSING)
    except OSError as exc:
        log.warning("%s cannot be read: %s", bundle, exc)
        return notice_module(
            f"the dashboard's frontend bundle cannot be read ({type(exc).__name__}: {exc}): reinstall tf-mobileperf"
        )
