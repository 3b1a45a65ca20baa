"""Run a plugin's tools in plain CPython, for the author's own tests.

:class:`FakeHost` stands in for the host's imports: config from a dict,
log lines kept in a list, state in a dict (with the same key rules and a
quota), and HTTP answered by a function the test supplies. It runs the
same argument decoding and result checks as the component does::

    host = FakeHost(config={"base_url": "http://upstream"})
    result = host.call(app.plugin, "greeter_greeting_get", {"name": "Ada"})
"""

import json
from typing import Any, Callable, Optional

from . import _host
from ._errors import ToolError
from ._host import StateError, _state_error
from ._plugin import Context, Plugin


class _InvalidKey:
    pass


class _QuotaExceeded:
    pass


class FakeHost:
    """In-memory stand-ins for ``config``, ``log``, ``state`` and ``http``.

    ``config``: the manifest's config table (values become strings).
    ``state``: the plugin's keys and values to start from.
    ``http``: answers the plugin's requests: called with ``(method, url,
    headers, body)`` (headers a list of ``(name, value)``, body bytes or
    ``None``), it returns ``(status, [(name, value), ...], body_bytes)``;
    without it every request fails with ``http_denied``.
    ``state_bytes``: the quota of keys and values together, as
    ``limits.state_kib`` sets it.
    """

    def __init__(
        self,
        config: Optional[dict] = None,
        state: Optional[dict] = None,
        http: Optional[Callable[[str, str, list, Optional[bytes]], tuple]] = None,
        state_bytes: int = 1 << 20,
    ) -> None:
        self.config = {k: str(v) for k, v in (config or {}).items()}
        self.state = dict(state or {})
        self.logs: list = []
        """``(level, message)`` of every line the plugin wrote."""
        self.requests: list = []
        """``(method, url, headers, body)`` of every request the plugin sent."""
        self._http = http
        self._state_bytes = state_bytes

    def call(self, plugin: Plugin, tool: str, arguments: Any = None, task_id: Optional[str] = None) -> Any:
        """Calls ``tool`` as the host would and returns its result, parsed
        from JSON; a failure raises :class:`toolhost.ToolError`."""
        previous = _host._current
        _host.install(self)
        try:
            text = plugin.run(tool, json.dumps(arguments or {}), Context("test-session", task_id, "test-call"))
        finally:
            _host.install(previous)
        return json.loads(text)

    # The backend protocol.

    def config_get(self, key: str) -> Optional[str]:
        return self.config.get(key)

    def log_write(self, level: str, message: str) -> None:
        self.logs.append((level, message))

    def _check_key(self, key: str) -> None:
        if not key or len(key.encode()) > 256 or any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
            raise _state_error(_InvalidKey())

    def state_get(self, key: str) -> Optional[str]:
        self._check_key(key)
        return self.state.get(key)

    def state_set(self, key: str, value: str) -> None:
        self._check_key(key)
        after = {**self.state, key: value}
        if sum(len(k.encode()) + len(v.encode()) for k, v in after.items()) > self._state_bytes:
            raise _state_error(_QuotaExceeded())
        self.state[key] = value

    def state_compare_and_set(self, key: str, expected: Optional[str], value: str) -> bool:
        self._check_key(key)
        if self.state.get(key) != expected:
            return False
        self.state_set(key, value)
        return True

    def state_delete(self, key: str) -> bool:
        self._check_key(key)
        return self.state.pop(key, None) is not None

    def state_list_keys(self, prefix: str) -> list:
        return sorted((k for k in self.state if k.startswith(prefix)), key=lambda k: k.encode())

    def http_send(self, method: str, url: str, headers: list, body: Optional[bytes]) -> tuple:
        from .http import _split

        _split(url)
        self.requests.append((method, url, headers, body))
        if self._http is None:
            raise ToolError("http_denied", "this FakeHost was given no http function")
        return self._http(method, url, headers, body)


__all__ = ["FakeHost", "StateError"]
