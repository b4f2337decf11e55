"""A small checker of JSON against declared shapes: each field's kind (a number, text, a list of numbers, an
object of a shape), and one ``ReportError`` naming the file and the field where the data is not what was declared."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from .finite_json import finite


class ReportError(ValueError):
    """A report, run summary or result row that is not what the schema says; names the file and the field."""

    def __init__(self, name: str, field: str, problem: str):
        self.name, self.field, self.problem = name, field, problem
        super().__init__(f"{name}: field {field!r} {problem}" if field else f"{name}: {problem}")


@dataclasses.dataclass(frozen=True)
class Kind:
    """A leaf field: what it may hold, in words for the error, and the test of a value."""

    words: str
    test: Callable[[Any], bool]


@dataclasses.dataclass(frozen=True)
class Shape:
    """An object whose named fields are of their kinds (``required`` ones must be there); null if ``nullable``."""

    fields: dict[str, Spec]
    required: tuple[str, ...] = ()
    nullable: bool = True


@dataclasses.dataclass(frozen=True)
class Each:
    """An object (or null) whose every value is of ``spec``: a map of rail, core or cluster to a number."""

    spec: Spec


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A list (or null, if ``nullable``) whose every item is of ``spec``."""

    spec: Spec
    nullable: bool = True


Spec = Kind | Shape | Each | ListOf


def _number(value: Any) -> bool:
    return type(value) in (int, float)  # not bool, which Python counts as an int


BOOL = Kind("true or false", lambda v: type(v) is bool)


BOOL_OR_NULL = Kind("true, false or null", lambda v: v is None or type(v) is bool)


NUMBER = Kind("a number or null", lambda v: v is None or _number(v))


WHOLE = Kind("a whole number or null", lambda v: v is None or type(v) is int)


COUNT = Kind("a whole number >= 0 or null", lambda v: v is None or (type(v) is int and v >= 0))


BATCH = Kind("a whole number >= 1 or null", lambda v: v is None or (type(v) is int and v >= 1))


TEXT = Kind("text or null", lambda v: v is None or isinstance(v, str))


OBJECT = Kind("an object or null", lambda v: v is None or isinstance(v, dict))


LIST = Kind("a list or null", lambda v: v is None or isinstance(v, list))


NUMBERS = Each(NUMBER)


def shown(value: Any) -> str:
    """A value as the error quotes it: text in quotes, anything else as JSON, cut short.

    Args:
        value: A loaded value.

    Returns:
        Its ``repr`` for text, else its JSON (``repr`` for what JSON cannot hold), at most 60 characters.
    """
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def json_type(value: Any) -> str:
    """The JSON name of a loaded value's type.

    Args:
        value: A loaded value.

    Returns:
        "boolean", "number", "string", "array" or "null"; Python's type name for anything else ("dict").
    """
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _words(spec: Spec) -> str:
    if isinstance(spec, Kind):
        return spec.words
    if isinstance(spec, ListOf):
        return "a list" + (" or null" if spec.nullable else "")
    nullable = spec.nullable if isinstance(spec, Shape) else True
    return "an object" + (" or null" if nullable else "")


def _check(value: Any, spec: Spec, field: str, name: str) -> None:
    """Raises ReportError naming ``field`` (a path: ``steps[3].power_w.VDD_IN``) if ``value`` is not ``spec``."""
    if isinstance(spec, Kind):
        if not spec.test(value):
            raise ReportError(name, field, f"must be {spec.words}, got {shown(value)}")
        return
    if value is None and (not isinstance(spec, (Shape, ListOf)) or spec.nullable):
        return
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise ReportError(name, field, f"must be {_words(spec)}, got {shown(value)}")
        for i, item in enumerate(value):
            _check(item, spec.spec, f"{field}[{i}]", name)
        return
    if not isinstance(value, dict):
        raise ReportError(name, field, f"must be {_words(spec)}, got {shown(value)}")
    if isinstance(spec, Each):
        for key, item in value.items():
            _check(item, spec.spec, f"{field}.{key}", name)
        return
    _check_fields(value, spec, name, f"{field}.")


def _check_fields(data: dict, shape: Shape, name: str, prefix: str = "") -> None:
    for key in shape.required:
        if key not in data:
            raise ReportError(name, prefix + key, "is missing")
    for key, spec in shape.fields.items():
        if key in data:
            _check(data[key], spec, prefix + key, name)


def checked(data: Any, shape: Shape, name: str, what: str) -> dict:
    """``data`` with NaN and infinity as null, checked field by field against ``shape``.

    Args:
        data: The loaded object.
        shape: What its fields must be.
        name: What errors call it (a file name).
        what: What errors say it is ("a report").

    Returns:
        A copy of ``data`` with NaN and infinity as null.

    Raises:
        ReportError: ``data`` is not an object, or names the first field that is not what ``shape`` says.
    """
    if not isinstance(data, dict):
        raise ReportError(name, "", f"is a JSON {json_type(data)}, not an object ({what})")
    data = finite(data)
    _check_fields(data, shape, name)
    return data
