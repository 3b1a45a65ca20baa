"""The Python SDK's own tests, in plain CPython:
`python3 -m unittest discover -s tests` in plugins/sdk-python."""

import json
import sys
import unittest
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolhost import Context, Length, Pattern, Plugin, Range, SchemaError, StateError, ToolError, http, state  # noqa: E402
from toolhost.testing import FakeHost  # noqa: E402


@dataclass
class Inner:
    label: Annotated[str, Length(max=10)]


@dataclass
class Args:
    query: Annotated[str, Length(min=1, max=20), Pattern("^[a-z ]+$"), "words"]
    kind: Literal["a", "b"] = "a"
    limit: Annotated[int, Range(1, 5)] = 2
    ratio: Annotated[float, Range(0, 1)] = 0.5
    tags: Annotated[Optional[list[Annotated[str, Length(max=4)]]], Length(max=2)] = None
    inner: Optional[Inner] = None


@dataclass
class Out:
    text: str
    count: int
    note: Optional[str] = None


plugin = Plugin()


@plugin.tool(title="Echo", description="Echoes its arguments; changes nothing.")
def demo_echo_get(ctx: Context, args: Args) -> Out:
    if args.query == "boom":
        raise KeyError("nope")
    if args.query == "bad result":
        return Out("x", "not a number")  # type: ignore[arg-type]
    if args.query == "refuse":
        raise ToolError("refused", "no", retryable=True)
    return Out(f"{args.kind}:{args.query}:{args.limit}", len(args.tags or []))


@plugin.tool(title="Count", description="Counts calls in state; changes the counter.")
def demo_counter_update(ctx: Context) -> Out:
    n = int(state.get("n") or "0") + 1
    if not state.compare_and_set("n", None if n == 1 else str(n - 1), str(n)):
        raise ToolError("conflict", "lost the race")
    return Out("counted", n)


class Schemas(unittest.TestCase):
    def test_arguments_are_closed_bounded_and_described(self):
        schema = json.loads(plugin.specs()[0][3])
        self.assertEqual(schema["required"], ["query"])
        self.assertIs(schema["additionalProperties"], False)
        self.assertEqual(schema["properties"]["query"], {"type": "string", "maxLength": 20, "minLength": 1, "pattern": "^[a-z ]+$", "description": "words"})
        self.assertEqual(schema["properties"]["kind"], {"type": "string", "enum": ["a", "b"]})
        self.assertEqual(schema["properties"]["limit"], {"type": "integer", "minimum": 1, "maximum": 5})
        self.assertEqual(schema["properties"]["tags"], {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2})
        self.assertIs(schema["properties"]["inner"]["additionalProperties"], False)
        self.assertEqual(json.loads(plugin.specs()[1][3]), {"type": "object", "properties": {}, "required": [], "additionalProperties": False})

    def test_a_type_without_a_closed_schema_fails_at_declaration(self):
        @dataclass
        class Free:
            anything: dict

        def demo_free_get(ctx: Context, args: Free) -> Out: ...

        with self.assertRaises(SchemaError):
            Plugin().tool(title="x", description="y")(demo_free_get)


    def test_an_unbounded_argument_fails_at_declaration(self):
        @dataclass
        class Loose:
            text: str

        @dataclass
        class Counted:
            n: int

        @dataclass
        class Listed:
            items: list[Annotated[str, Length(max=3)]]

        for args in (Loose, Counted, Listed):

            def demo_loose_get(ctx: Context, a: args) -> Out: ...  # noqa: B023

            demo_loose_get.__annotations__["a"] = args
            with self.assertRaises(SchemaError, msg=args.__name__):
                Plugin().tool(title="x", description="y")(demo_loose_get)


class Calls(unittest.TestCase):
    def test_arguments_are_decoded_with_defaults(self):
        out = FakeHost().call(plugin, "demo_echo_get", {"query": "hi", "tags": ["ab"]})
        self.assertEqual(out, {"text": "a:hi:2", "count": 1})

    def test_arguments_outside_their_bounds_are_invalid(self):
        for bad in ({"query": "HI"}, {"query": "hi", "limit": 9}, {"query": "hi", "extra": 1}, {}, {"query": "hi", "kind": "c"}, {"query": "hi", "limit": True}):
            with self.assertRaises(ToolError) as caught:
                FakeHost().call(plugin, "demo_echo_get", bad)
            self.assertEqual(caught.exception.code, "invalid_arguments", bad)

    def test_tool_errors_pass_and_other_exceptions_become_plugin_error(self):
        host = FakeHost()
        with self.assertRaises(ToolError) as caught:
            host.call(plugin, "demo_echo_get", {"query": "refuse"})
        self.assertEqual((caught.exception.code, caught.exception.retryable), ("refused", True))
        with self.assertRaises(ToolError) as caught:
            host.call(plugin, "demo_echo_get", {"query": "boom"})
        self.assertEqual(caught.exception.code, "plugin_error")
        self.assertNotIn("nope", caught.exception.message)
        self.assertIn("KeyError", host.logs[-1][1])

    def test_a_result_that_does_not_fit_its_shape_is_a_plugin_error(self):
        with self.assertRaises(ToolError) as caught:
            FakeHost().call(plugin, "demo_echo_get", {"query": "bad result"})
        self.assertEqual(caught.exception.code, "plugin_error")
        self.assertIn("/count", caught.exception.message)

    def test_state_compare_and_set_and_its_errors(self):
        host = FakeHost()
        self.assertEqual(host.call(plugin, "demo_counter_update")["count"], 1)
        self.assertEqual(host.call(plugin, "demo_counter_update")["count"], 2)
        full = FakeHost(state_bytes=1)
        with self.assertRaises(StateError) as caught:
            full.call(plugin, "demo_counter_update")
        self.assertEqual(caught.exception.code, "state_quota_exceeded")


class Http(unittest.TestCase):
    def test_requests_go_to_the_host_with_a_length_and_come_back_as_a_response(self):
        def upstream(method, url, headers, body):
            return 201, [("content-type", "application/json")], json.dumps({"got": json.loads(body)}).encode()

        host = FakeHost(http=upstream)
        from toolhost import _host

        _host.install(host)
        try:
            response = http.send_json("POST", "http://upstream.test/items?x=1", {"a": 1})
            with self.assertRaises(http.HttpError) as caught:
                http.get("ftp://upstream.test/")
            with self.assertRaises(http.HttpError):
                http.request("GET", "http://upstream.test/", body=b"x")
        finally:
            _host.install(None)
        self.assertEqual((response.status, response.json(), response.header("Content-Type")), (201, {"got": {"a": 1}}, "application/json"))
        method, url, headers, body = host.requests[0]
        self.assertIn(("content-length", str(len(body))), headers)
        self.assertEqual(caught.exception.code, "http_invalid")


if __name__ == "__main__":
    unittest.main()
