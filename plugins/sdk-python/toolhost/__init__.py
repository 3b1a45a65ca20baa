"""The toolhost plugin kit for Python: write each tool as a typed function,
and the SDK does the rest of the ``toolhost:plugin`` contract (``wit/``).

::

    from dataclasses import dataclass
    from typing import Annotated

    from toolhost import Context, Length, Plugin, ToolError

    plugin = Plugin()

    @dataclass
    class Greet:
        name: Annotated[str, Length(max=64), "who to greet"]

    @dataclass
    class Greeting:
        text: str

    @plugin.tool(title="Greet", description="Returns a greeting for a name; changes nothing.")
    def greeter_greeting_get(ctx: Context, args: Greet) -> Greeting:
        if not args.name.strip():
            raise ToolError("invalid_name", "give a name that is not blank")
        return Greeting(f"Hello, {args.name}!")

    Tools = plugin.exports()

Build it with componentize-py against ``wit/`` (docs/plugin-authors.md).
The host's imports are here too: :mod:`toolhost.config`,
:mod:`toolhost.log`, :mod:`toolhost.state` and, over ``wasi:http``,
:mod:`toolhost.http`. Everything goes through what the manifest grants.
"""

from . import config, log, state
from ._errors import ToolError
from ._host import StateError
from ._plugin import Context, Plugin
from ._schema import Length, Pattern, Range, SchemaError

__all__ = [
    "Context",
    "Length",
    "Pattern",
    "Plugin",
    "Range",
    "SchemaError",
    "StateError",
    "ToolError",
    "config",
    "log",
    "state",
]
