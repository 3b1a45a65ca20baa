"""JSON Schemas from typed dataclasses, and the checks that go with them.

A tool's arguments and result are dataclasses whose fields carry their
bounds beside them, with ``typing.Annotated``::

    @dataclass
    class Search:
        query: Annotated[str, Length(max=200), "words to look for"]
        limit: Annotated[int, Range(1, 50)] = 10

From that the SDK writes closed, bounded schemas (every object
``additionalProperties: false`` with ``required``; every string, number
and list bounded), decodes arguments into the dataclass, and checks a
result against the shape its tool declared before it leaves the plugin.
"""

import dataclasses
import functools
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

from ._errors import ToolError


@dataclass(frozen=True)
class Length:
    """Bounds of a ``str`` (characters) or a ``list`` (items): ``Length(max=64)``."""

    max: int
    """The most characters or items (``maxLength``, ``maxItems``)."""
    min: int = 0
    """The fewest (``minLength``, ``minItems``); 0 states nothing."""


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of an ``int`` or ``float``: ``Range(1, 50)``."""

    min: float
    """The smallest value allowed (``minimum``)."""
    max: float
    """The largest value allowed (``maximum``)."""


@dataclass(frozen=True)
class Pattern:
    """A regular expression a ``str`` must match somewhere (anchor it with ``^…$``)."""

    regex: str
    """The expression, in the common subset of Python's and ECMA 262's syntax."""


class SchemaError(TypeError):
    """A type the SDK cannot turn into a closed, bounded schema; raised when
    the tool is declared, so the author sees it before the host does."""


class ShapeError(ValueError):
    """A value that does not fit its declared type; ``at`` is a JSON pointer."""

    def __init__(self, at: str, problem: str) -> None:
        super().__init__(f"{at or '/'}: {problem}")
        self.at = at or "/"
        self.problem = problem


def _unwrap(tp: Any) -> tuple:
    """``Annotated[T, m…]`` → ``(T, [m…])``; other types → ``(tp, [])``."""
    if typing.get_origin(tp) is typing.Annotated:
        inner, *metas = typing.get_args(tp)
        more_inner, more = _unwrap(inner)
        return more_inner, list(more) + metas
    return tp, []


def _optional(tp: Any) -> tuple:
    """``Optional[T]`` → ``(T, True)``; other types → ``(tp, False)``."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict:
    # Resolving annotations is most of a small call's decoding time; a
    # dataclass's do not change, so once per class (at declaration, so the
    # snapshot already holds them).
    return typing.get_type_hints(cls, include_extras=True)


def object_schema(cls: type, where: str, bounded: bool = False) -> dict:
    """The closed object schema of dataclass ``cls``; with ``bounded``
    (arguments), every string, number and list must carry its bounds."""
    if not dataclasses.is_dataclass(cls):
        raise SchemaError(f"{where}: {cls!r} is not a dataclass; declare one with @dataclass")
    hints = _hints(cls)
    properties, required = {}, []
    for field in dataclasses.fields(cls):
        tp, is_optional = _optional(hints[field.name])
        tp, metas = _unwrap(tp)
        inner, inner_optional = _optional(tp)
        is_optional = is_optional or inner_optional
        properties[field.name] = type_schema(inner, metas, f"{where}.{field.name}", bounded)
        has_default = (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        )
        if not (has_default or is_optional):
            required.append(field.name)
    schema = {"type": "object", "properties": properties, "required": required}
    schema["additionalProperties"] = False
    doc = (cls.__doc__ or "").strip()
    if doc and not doc.startswith(cls.__name__ + "("):
        schema["description"] = " ".join(doc.split())
    return schema


def type_schema(tp: Any, metas: list, where: str, bounded: bool = False) -> dict:
    """The schema of one value of type ``tp`` with its bounds ``metas``."""
    tp, more = _unwrap(tp)
    metas = list(metas) + more
    schema: dict = {}
    origin = typing.get_origin(tp)

    def need(kind: type, what: str) -> None:
        if bounded and not any(isinstance(m, kind) for m in metas):
            raise SchemaError(f"{where}: give it {what} in Annotated[...]; the lint refuses unbounded arguments")

    if tp is bool:
        schema["type"] = "boolean"
    elif tp is int or tp is float:
        schema["type"] = "integer" if tp is int else "number"
        need(Range, "a Range(min, max)")
        for m in metas:
            if isinstance(m, Range):
                schema["minimum"], schema["maximum"] = m.min, m.max
    elif tp is str:
        schema["type"] = "string"
        if not any(isinstance(m, Pattern) for m in metas):
            need(Length, "a Length(max=…) or a Pattern")
        for m in metas:
            if isinstance(m, Length):
                schema["maxLength"] = m.max
                if m.min:
                    schema["minLength"] = m.min
            elif isinstance(m, Pattern):
                re.compile(m.regex)
                schema["pattern"] = m.regex
    elif origin is Literal:
        values = list(typing.get_args(tp))
        if all(isinstance(v, str) for v in values):
            schema["type"] = "string"
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            schema["type"] = "integer"
        schema["enum"] = values
    elif origin is list:
        (item,) = typing.get_args(tp) or (None,)
        if item is None:
            raise SchemaError(f"{where}: say what the list holds, e.g. list[str]")
        item_type, item_metas = _unwrap(item)
        schema["type"] = "array"
        need(Length, "a Length(max=…) for its items")
        schema["items"] = type_schema(item_type, item_metas, f"{where}[]", bounded)
        for m in metas:
            if isinstance(m, Length):
                schema["maxItems"] = m.max
                if m.min:
                    schema["minItems"] = m.min
    elif dataclasses.is_dataclass(tp):
        schema = object_schema(tp, where, bounded)
    else:
        raise SchemaError(
            f"{where}: {tp!r} has no closed JSON Schema; use str, int, float, bool, "
            "Literal[…], list[…], Optional[…] or a dataclass"
        )
    for m in metas:
        if isinstance(m, str):
            schema["description"] = m
    return schema


def decode(cls: type, value: Any, at: str = "") -> Any:
    """Arguments (parsed JSON) → an instance of dataclass ``cls``, checked
    against the same bounds its schema states."""
    return _decode(cls, [], value, at)


def _decode(tp: Any, metas: list, value: Any, at: str) -> Any:
    tp, more = _unwrap(tp)
    metas = list(metas) + more
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ShapeError(at, "expected an object")
        hints = _hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ShapeError(f"{at}/{unknown[0]}", "no such argument")
        kwargs = {}
        for field in dataclasses.fields(tp):
            field_type, is_optional = _optional(hints[field.name])
            field_type, field_metas = _unwrap(field_type)
            inner, inner_optional = _optional(field_type)
            if field.name not in value:
                has_default = (
                    field.default is not dataclasses.MISSING
                    or field.default_factory is not dataclasses.MISSING
                )
                if not has_default and not (is_optional or inner_optional):
                    raise ShapeError(f"{at}/{field.name}", "missing")
                if not has_default:
                    kwargs[field.name] = None
                continue
            kwargs[field.name] = _decode(inner, field_metas, value[field.name], f"{at}/{field.name}")
        return tp(**kwargs)
    if tp is bool:
        if not isinstance(value, bool):
            raise ShapeError(at, "expected true or false")
        return value
    if tp is int or tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ShapeError(at, "expected a number")
        if tp is int:
            if isinstance(value, float) and not value.is_integer():
                raise ShapeError(at, "expected a whole number")
            value = int(value)
        for m in metas:
            if isinstance(m, Range) and not m.min <= value <= m.max:
                raise ShapeError(at, f"must be from {m.min} to {m.max}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ShapeError(at, "expected a string")
        for m in metas:
            if isinstance(m, Length) and not m.min <= len(value) <= m.max:
                raise ShapeError(at, f"must be {m.min} to {m.max} characters long")
            if isinstance(m, Pattern) and not re.search(m.regex, value):
                raise ShapeError(at, f"must match {m.regex}")
        return value
    if origin is Literal:
        if value not in typing.get_args(tp) or isinstance(value, bool) != any(
            isinstance(v, bool) for v in typing.get_args(tp)
        ):
            raise ShapeError(at, f"must be one of {list(typing.get_args(tp))}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ShapeError(at, "expected a list")
        for m in metas:
            if isinstance(m, Length) and not m.min <= len(value) <= m.max:
                raise ShapeError(at, f"must hold {m.min} to {m.max} items")
        (item,) = typing.get_args(tp)
        return [_decode(item, [], v, f"{at}/{i}") for i, v in enumerate(value)]
    raise ShapeError(at, f"cannot decode {tp!r}")


def encode(tp: Any, value: Any, at: str = "", metas: tuple = ()) -> Any:
    """A result → JSON-ready values, checked against the declared type ``tp``
    and its bounds.

    ``None`` in an ``Optional`` field is left out; anything else that does
    not fit raises :class:`ShapeError`, so a plugin never hands the host a
    result its output schema does not promise.
    """
    tp, more = _unwrap(tp)
    metas = list(metas) + more
    value = _encode(tp, metas, value, at)
    if isinstance(value, (str, int, float, list)) and not isinstance(value, bool):
        # The same bounds the schema states, checked as for arguments.
        _decode(tp, metas, value, at)
    return value


def _encode(tp: Any, metas: list, value: Any, at: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, tp):
            raise ShapeError(at, f"expected {tp.__name__}, got {type(value).__name__}")
        hints = _hints(tp)
        out = {}
        for field in dataclasses.fields(tp):
            field_type, is_optional = _optional(hints[field.name])
            field_type, field_metas = _unwrap(field_type)
            inner, inner_optional = _optional(field_type)
            item = getattr(value, field.name)
            if item is None and (is_optional or inner_optional):
                continue
            out[field.name] = encode(inner, item, f"{at}/{field.name}", tuple(field_metas))
        return out
    if tp is bool:
        if not isinstance(value, bool):
            raise ShapeError(at, "expected a bool")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ShapeError(at, "expected an int")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ShapeError(at, "expected a float")
        if value != value or value in (float("inf"), float("-inf")):
            raise ShapeError(at, "NaN and infinity are not JSON")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ShapeError(at, "expected a str")
        return value
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ShapeError(at, f"expected one of {list(typing.get_args(tp))}")
        return value
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ShapeError(at, "expected a list")
        (item,) = typing.get_args(tp)
        return [encode(item, v, f"{at}/{i}") for i, v in enumerate(value)]
    raise ShapeError(at, f"cannot encode {tp!r}")


def invalid_arguments(error: ShapeError) -> ToolError:
    """The tool error for arguments that do not fit (the host's schema check
    normally catches these first)."""
    return ToolError("invalid_arguments", f"argument {error.at}: {error.problem}")

