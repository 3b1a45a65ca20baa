"""Where the host's imports come from.

Inside a component they are the bindings componentize-py generates for
``wit/`` (the ``wit_world`` package); in CPython, for an author's local
tests, :mod:`toolhost.testing` installs in-memory stand-ins. Everything
else in the SDK goes through :func:`current`, so both look the same to a
tool.
"""

from typing import Optional, Protocol

from ._errors import ToolError

# A component has no files at run time: every module must be imported while
# componentize-py pre-initialises the app, so the bindings are imported here
# and not on first use. In CPython (an author's tests) they are absent.
try:
    from componentize_py_types import Err as _Err
    from wit_world.imports import config as _config
    from wit_world.imports import log as _log
    from wit_world.imports import state as _state
except ImportError:
    _config = None


class StateError(ToolError):
    """A ``state`` operation failed; the operation did not happen.

    ``code`` is ``state_invalid_key`` (the key is empty, longer than 256
    bytes or holds a control character), ``state_quota_exceeded`` (the write
    would pass ``limits.state_kib``) or ``state_unavailable`` (the host could
    not reach its store; retryable). Left uncaught, it reaches the model as
    that tool error.
    """


class Backend(Protocol):
    """What the SDK needs from the host: the WIT imports, in Python terms."""

    def config_get(self, key: str) -> Optional[str]: ...
    def log_write(self, level: str, message: str) -> None: ...
    def state_get(self, key: str) -> Optional[str]: ...
    def state_set(self, key: str, value: str) -> None: ...
    def state_compare_and_set(self, key: str, expected: Optional[str], value: str) -> bool: ...
    def state_delete(self, key: str) -> bool: ...
    def state_list_keys(self, prefix: str) -> list: ...
    def http_send(self, method: str, url: str, headers: list, body: Optional[bytes]) -> tuple:
        """Only for stand-ins: inside a component :mod:`toolhost.http`
        speaks ``wasi:http`` itself."""


class Bindings:
    """The component's own imports (componentize-py's ``wit_world``)."""

    def __init__(self) -> None:
        if _config is None:
            raise RuntimeError(
                "the toolhost bindings are missing: build with componentize-py, "
                "or install a toolhost.testing.FakeHost in tests"
            )
        self._config = _config
        self._log = _log
        self._state = _state
        self._levels = {
            "debug": _log.Level.DEBUG,
            "info": _log.Level.INFO,
            "warn": _log.Level.WARN,
            "error": _log.Level.ERROR,
        }

    def config_get(self, key: str) -> Optional[str]:
        return self._config.get(key)

    def log_write(self, level: str, message: str) -> None:
        self._log.write(self._levels[level], message)

    def _state_call(self, operation, *args):
        try:
            return operation(*args)
        except _Err as failure:
            raise _state_error(failure.value) from None

    def state_get(self, key: str) -> Optional[str]:
        return self._state_call(self._state.get, key)

    def state_set(self, key: str, value: str) -> None:
        self._state_call(self._state.set, key, value)

    def state_compare_and_set(self, key: str, expected: Optional[str], value: str) -> bool:
        return self._state_call(self._state.compare_and_set, key, expected, value)

    def state_delete(self, key: str) -> bool:
        return self._state_call(self._state.delete, key)

    def state_list_keys(self, prefix: str) -> list:
        return self._state_call(self._state.list_keys, prefix)


def _state_error(error) -> StateError:
    # The WIT variant arrives as one dataclass per case; only `unavailable`
    # carries text.
    kind = type(error).__name__
    if kind.endswith("InvalidKey"):
        return StateError(
            "state_invalid_key",
            "the state key is empty, longer than 256 bytes or holds a control character",
        )
    if kind.endswith("QuotaExceeded"):
        return StateError(
            "state_quota_exceeded",
            "the plugin's stored state would pass its quota (limits.state_kib); delete something first",
        )
    return StateError(
        "state_unavailable",
        f"the host could not reach its store ({getattr(error, 'value', '')}); try again later",
        retryable=True,
    )


_current: Optional[Backend] = None


def current() -> Backend:
    """The backend in use: the component's bindings unless a test set one."""
    global _current
    if _current is None:
        _current = Bindings()
    return _current


def install(backend: Optional[Backend]) -> None:
    """Replaces the backend (``None`` goes back to the bindings)."""
    global _current
    _current = backend
