"""Non-secret settings of this plugin, from the manifest's ``config`` table.

Secrets never pass through here: the host adds credentials to allow-listed
HTTP requests itself.
"""

from typing import Optional

from . import _host
from ._errors import ToolError


def get(key: str) -> Optional[str]:
    """The value the manifest sets for ``key``, or ``None``."""
    return _host.current().config_get(key)


def require(key: str) -> str:
    """The value for ``key``; a ``not_configured`` tool error if the
    manifest sets none."""
    value = get(key)
    if value is None:
        raise ToolError(
            "not_configured",
            f"the plugin needs `{key}` in its manifest config; ask the platform team to set it",
        )
    return value
