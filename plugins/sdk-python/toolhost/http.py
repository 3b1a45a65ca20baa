"""A small blocking HTTP client over ``wasi:http/outgoing-handler``.

The host sends every request itself: it decides which destinations the
plugin may reach, adds credentials the plugin never sees, and enforces
timeouts and sizes. This module turns Python values into the WASI resources
and back, and sorts the host's error codes into :class:`HttpError` codes a
tool can pass on or act on.

It needs a component built against the ``plugin-http`` world
(plugins/sdk-python/wit/http.wit: ``plugin`` plus ``wasi:http``'s outgoing
handler); docs/plugin-authors.md shows the build line.
"""

import json
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Tuple

from . import _host
from ._errors import ToolError

# Imported while the component is pre-initialised (there are no files to
# import from at run time); absent in CPython and in a component built
# without the wasi:http world.
try:
    from componentize_py_types import Err, Ok
    from wit_world.imports import outgoing_handler
    from wit_world.imports import wasi_http_types as t
except ImportError:
    outgoing_handler = None

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_WRITE_CHUNK = 4096
_READ_CHUNK = 64 * 1024


class HttpError(ToolError):
    """A request that produced no response.

    ``code`` is ``http_denied`` (the manifest does not allow the
    destination or method), ``http_timeout`` (retryable), ``http_too_large``
    (the response passed the host's size limit), ``http_invalid`` (a URL or
    header the host refuses) or ``http_failed`` (anything else; retryable).
    """


@dataclass
class Response:
    """A complete response: the whole body is read before it is returned."""

    status: int
    """The status code, e.g. 200."""
    headers: list = field(default_factory=list)
    """``(name, value)`` pairs in the order received, names in lower case."""
    body: bytes = b""
    """The response body."""

    def text(self) -> str:
        """The body as text; invalid UTF-8 becomes U+FFFD."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON; ``http_failed`` if it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            raise HttpError("http_failed", f"the upstream answered {self.status} with a body that is not JSON") from None

    def header(self, name: str) -> Optional[str]:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        lowered = name.lower()
        return next((v for n, v in self.headers if n.lower() == lowered), None)


def request(
    method: str,
    url: str,
    headers: Sequence[Tuple[str, str]] = (),
    body: Optional[bytes] = None,
) -> Response:
    """Sends one request through the host and waits for the whole response.

    Any status, 4xx and 5xx included, is a :class:`Response`; redirects are
    not followed. ``url`` is absolute ``http://`` or ``https://`` in visible
    ASCII (percent-encode the rest).
    """
    method = method.upper()
    if method not in _METHODS:
        raise HttpError("http_invalid", f"the method {method} is not one of {', '.join(_METHODS)}")
    if body is not None and method in ("GET", "HEAD"):
        raise HttpError("http_invalid", f"a {method} request cannot carry a body")
    headers = list(headers)
    if body is not None and not any(n.lower() == "content-length" for n, _ in headers):
        # Without a length the body goes chunked, which some servers refuse.
        headers.append(("content-length", str(len(body))))
    backend = _host.current()
    send = send_wasi if isinstance(backend, _host.Bindings) else backend.http_send
    status, response_headers, response_body = send(method, url, headers, body)
    return Response(status, list(response_headers), bytes(response_body))


def get(url: str, headers: Sequence[Tuple[str, str]] = ()) -> Response:
    """A ``GET`` of ``url``."""
    return request("GET", url, headers)


def send_json(method: str, url: str, value: Any, headers: Sequence[Tuple[str, str]] = ()) -> Response:
    """A request whose body is ``value`` as JSON (``content-type:
    application/json``)."""
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return request(method, url, [("content-type", "application/json"), *headers], body)


def _split(url: str) -> tuple:
    """``url`` → ``(scheme, authority, path_with_query)``."""
    if any(not 0x21 <= ord(c) <= 0x7E for c in url):
        raise HttpError("http_invalid", f"only visible ASCII is allowed in a URL; percent-encode the rest ({url!r})")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise HttpError("http_invalid", f"the URL must start with http:// or https:// ({url!r})")
    rest = rest.split("#", 1)[0]
    cut = min([i for i in (rest.find("/"), rest.find("?")) if i >= 0], default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if not authority or "@" in authority:
        raise HttpError("http_invalid", f"the URL needs a host and no user info ({url!r})")
    return scheme.lower(), authority, tail if tail.startswith("/") else "/" + tail


def send_wasi(method: str, url: str, headers: list, body: Optional[bytes]) -> tuple:
    """Sends over ``wasi:http`` (the component's bindings); used by the
    default backend."""
    if outgoing_handler is None:
        raise HttpError(
            "http_denied",
            "this component was built without wasi:http; build it against the plugin-http world (docs/plugin-authors.md)",
        )
    scheme, authority, path = _split(url)
    fields = t.Fields()
    for name, value in headers:
        try:
            fields.append(name, value.encode())
        except Err:
            raise HttpError("http_invalid", f"the host refused the request header {name!r}") from None
    outgoing = t.OutgoingRequest(fields)
    outgoing.set_method(getattr(t, "Method_" + method.capitalize())())
    outgoing.set_scheme(t.Scheme_Http() if scheme == "http" else t.Scheme_Https())
    try:
        outgoing.set_authority(authority)
        outgoing.set_path_with_query(path)
    except Err:
        raise HttpError("http_invalid", f"the host refused the URL {url!r}") from None
    # The body is taken before `handle` consumes the request and written
    # after, when the host reads it; none is opened for a bodiless request.
    outgoing_body = outgoing.body() if body is not None else None
    try:
        pending = outgoing_handler.handle(outgoing, None)
    except Err as failure:
        raise _from_code(failure.value) from None
    write_error = None
    if outgoing_body is not None:
        try:
            with outgoing_body.write() as stream:
                for start in range(0, len(body), _WRITE_CHUNK):
                    stream.blocking_write_and_flush(body[start : start + _WRITE_CHUNK])
            t.OutgoingBody.finish(outgoing_body, None)
        except Err as failure:
            write_error = HttpError("http_failed", f"the request body could not be sent ({failure.value!r})", True)
    with pending:
        with pending.subscribe() as ready:
            ready.block()
        outcome = pending.get()
    if outcome is None or not isinstance(outcome, Ok):
        raise HttpError("http_failed", "no response after waiting for it", True)
    if not isinstance(outcome.value, Ok):
        raise _from_code(outcome.value.value)
    if write_error is not None:
        raise write_error
    with outcome.value.value as response:
        status = response.status()
        with response.headers() as received:
            pairs = [(n, v.decode("utf-8", errors="replace")) for n, v in received.entries()]
        chunks = []
        with response.consume() as incoming:
            with incoming.stream() as stream:
                while True:
                    try:
                        chunks.append(stream.blocking_read(_READ_CHUNK))
                    except Err as failure:
                        if type(failure.value).__name__.endswith("Closed"):
                            break
                        code = t.http_error_code(failure.value.value)
                        raise _from_code(code) if code is not None else HttpError(
                            "http_failed", "the response body ended early", True
                        ) from None
    return status, pairs, b"".join(chunks)


def _from_code(code: Any) -> HttpError:
    kind = type(code).__name__.removeprefix("ErrorCode_")
    if kind == "HttpRequestDenied":
        return HttpError("http_denied", "the host refused to send the request to this destination; the manifest does not allow it")
    if kind in ("ConnectionTimeout", "ConnectionReadTimeout", "ConnectionWriteTimeout", "HttpResponseTimeout", "DnsTimeout"):
        return HttpError("http_timeout", "the upstream did not answer in time", True)
    if kind in ("HttpResponseBodySize", "HttpResponseHeaderSectionSize", "HttpResponseHeaderSize"):
        return HttpError("http_too_large", "the upstream's response is larger than the host allows")
    return HttpError("http_failed", f"the request failed ({kind})", True)

