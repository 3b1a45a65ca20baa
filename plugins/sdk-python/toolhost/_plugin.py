"""Tools declared as typed functions, and the ``tools`` export built from them."""

import inspect
import json
import traceback
import typing
from dataclasses import dataclass, is_dataclass
from typing import Any, Callable, Optional

from . import _host
from ._errors import ToolError
from ._schema import SchemaError, ShapeError, decode, encode, invalid_arguments, object_schema

# Imported now, while componentize-py pre-initialises the app: a component
# has no files to import from at run time. The record types live in
# `types`, renamed `toolhost_plugin_types` when the world is merged with
# wasi:http's (whose interface is also `types`).
try:
    from componentize_py_types import Err as _Err

    try:
        from wit_world.imports import toolhost_plugin_types as _types
    except ImportError:
        from wit_world.imports import types as _types
except ImportError:
    _types = None


@dataclass(frozen=True)
class Context:
    """Facts about the call, filled in by the host; not secrets, and not
    changeable by the plugin."""

    session_id: str
    """Opaque id of the MCP session the call belongs to."""
    task_id: Optional[str]
    """Id of the task the session is bound to, if any."""
    call_id: str
    """Unique id of this call, for correlating log lines."""


@dataclass
class _Tool:
    name: str
    title: str
    description: str
    function: Callable
    arguments: Optional[type]
    result: type
    input_schema: str
    output_schema: str


_EMPTY_INPUT = json.dumps({"type": "object", "properties": {}, "required": [], "additionalProperties": False})


class Plugin:
    """The plugin's tools. Declare each with :meth:`tool`, then export the
    component from the module componentize-py builds (``app.py``)::

        plugin = Plugin()

        @plugin.tool(title="Get an item", description="Returns one item by its id …")
        def shop_item_get(ctx: Context, args: GetItem) -> Item: ...

        Tools = plugin.exports()
    """

    def __init__(self) -> None:
        self._tools: dict = {}

    def tool(
        self, *, title: str, description: str, name: Optional[str] = None
    ) -> Callable[[Callable], Callable]:
        """Declares a tool: ``name`` (default: the function's name),
        ``title`` and ``description`` as the model reads them.

        The function takes the :class:`Context` and, if the tool has
        arguments, one dataclass instance (its annotation gives the input
        schema); it returns an instance of the dataclass its return
        annotation names (the output schema). Schemas are generated here, at
        declaration, so a type without a closed, bounded schema fails the
        build rather than a call.
        """

        def declare(function: Callable) -> Callable:
            tool_name = name or function.__name__
            if tool_name in self._tools:
                raise SchemaError(f"{tool_name}: declared twice")
            hints = typing.get_type_hints(function, include_extras=True)
            params = list(inspect.signature(function).parameters)
            if not 1 <= len(params) <= 2:
                raise SchemaError(f"{tool_name}: takes (ctx) or (ctx, args), not {len(params)} parameter(s)")
            arguments = hints.get(params[1]) if len(params) == 2 else None
            if len(params) == 2 and not is_dataclass(arguments):
                raise SchemaError(f"{tool_name}: annotate `{params[1]}` with the arguments' dataclass")
            result = hints.get("return")
            if not is_dataclass(result):
                raise SchemaError(f"{tool_name}: annotate the return type with the result's dataclass")
            input_schema = (
                json.dumps(object_schema(arguments, f"{tool_name} arguments", bounded=True))
                if arguments is not None
                else _EMPTY_INPUT
            )
            output_schema = json.dumps(object_schema(result, f"{tool_name} result"))
            self._tools[tool_name] = _Tool(
                tool_name, title, description, function, arguments, result, input_schema, output_schema
            )
            return function

        return declare

    def specs(self) -> list:
        """What ``describe()`` returns: ``(name, title, description,
        input_schema, output_schema)`` per tool, in declaration order."""
        return [
            (t.name, t.title, t.description, t.input_schema, t.output_schema)
            for t in self._tools.values()
        ]

    def run(self, tool: str, arguments: str, context: Context) -> str:
        """Runs one call: decodes the arguments, calls the tool, checks and
        encodes its result. Raises :class:`ToolError` for every failure, an
        unexpected exception included (as ``plugin_error``)."""
        entry = self._tools.get(tool)
        if entry is None:
            raise ToolError("unknown_tool", f"this plugin has no tool named {tool!r}")
        try:
            parsed = json.loads(arguments)
            if entry.arguments is None:
                if parsed not in ({}, None):
                    raise ShapeError(f"/{sorted(parsed)[0]}", "no such argument")
                value = entry.function(context)
            else:
                value = entry.function(context, decode(entry.arguments, parsed))
        except ToolError:
            raise
        except ShapeError as error:
            raise invalid_arguments(error) from None
        except BaseException as error:  # noqa: BLE001 - SystemExit too: the call must end cleanly
            raise _unexpected(tool, error) from None
        try:
            return json.dumps(encode(entry.result, value), ensure_ascii=False, allow_nan=False)
        except ShapeError as error:
            _safe_log(f"{tool}: result does not fit its output schema at {error}")
            raise ToolError(
                "plugin_error",
                f"the tool's result did not fit its declared shape ({error.at}); this is a bug in the plugin",
            ) from None

    def exports(self) -> type:
        """The class componentize-py exports as the ``tools`` interface.
        Assign it to ``Tools`` in the module the component is built from."""
        plugin = self

        class Tools:
            def describe(self) -> list:
                spec = _types.ToolSpec
                return [spec(*fields) for fields in plugin.specs()]

            def call(self, tool: str, arguments: str, context: Any) -> str:
                ctx = Context(context.session_id, context.task_id, context.call_id)
                try:
                    return plugin.run(tool, arguments, ctx)
                except ToolError as error:
                    raise _Err(_types.ToolError(error.code, error.message, error.retryable)) from None

        return Tools


def _safe_log(message: str) -> None:
    try:
        _host.current().log_write("error", message)
    except Exception:  # noqa: BLE001 - the call must end cleanly whatever the log does
        pass


def _unexpected(tool: str, error: BaseException) -> ToolError:
    """An exception the tool did not handle: the traceback goes to the host's
    log, and the model gets a clean `plugin_error` (no internals)."""
    lines = "".join(traceback.format_exception(error))
    _safe_log(f"{tool}: unhandled {type(error).__name__}: {lines[-1500:]}")
    return ToolError(
        "plugin_error",
        f"the tool failed with an unexpected {type(error).__name__}; the host's log has the details",
    )

