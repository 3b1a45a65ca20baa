"""Durable key-value storage of this plugin, kept by the host across calls,
sessions and restarts, within the manifest's ``limits.state_kib``.

Keys are scoped to the plugin. Every function raises
:class:`toolhost.StateError` (a :class:`toolhost.ToolError`) when the host
refuses or cannot do the operation.
"""

import json
from typing import Any, Optional

from . import _host


def get(key: str) -> Optional[str]:
    """The value stored under ``key``, or ``None``."""
    return _host.current().state_get(key)


def set(key: str, value: str) -> None:  # noqa: A001 - mirrors the WIT name
    """Stores ``value`` under ``key``, replacing any value there."""
    _host.current().state_set(key, value)


def compare_and_set(key: str, expected: Optional[str], value: str) -> bool:
    """Stores ``value`` only if the current value is ``expected`` (``None``:
    only if the key is absent); returns whether it stored. The check and the
    write are one step, so of two concurrent callers only one wins."""
    return _host.current().state_compare_and_set(key, expected, value)


def delete(key: str) -> bool:
    """Removes ``key``; returns whether it existed."""
    return _host.current().state_delete(key)


def list_keys(prefix: str = "") -> list:
    """The keys that start with ``prefix``, in byte order."""
    return list(_host.current().state_list_keys(prefix))


def get_json(key: str) -> Any:
    """The JSON value stored under ``key`` (``None`` if absent)."""
    text = get(key)
    return None if text is None else json.loads(text)


def set_json(key: str, value: Any) -> None:
    """Stores ``value`` as compact JSON under ``key``."""
    set(key, json.dumps(value, separators=(",", ":"), ensure_ascii=False))
