"""The billing plugin's own tests, in plain CPython against a fake billing
API: `PYTHONPATH=../sdk-python python3 -m unittest` in plugins/billing.
The host's integration tests run the built component against the real
demo upstream."""

import json
import unittest

import app
from toolhost import ToolError
from toolhost.testing import FakeHost

CHARGES = {
    "88231": [
        {"id": "ch_a", "amount_cents": 14900, "currency": "EUR", "card": "visa 1", "captured_at": "2026-11-18T10:02:11Z", "status": "captured", "refund_id": None},
        {"id": "ch_b", "amount_cents": 14900, "currency": "EUR", "card": "visa 1", "captured_at": "2026-11-18T10:02:48Z", "status": "captured", "refund_id": None},
    ],
    "88190": [
        {"id": "ch_c", "amount_cents": 14900, "currency": "EUR", "card": "visa 2", "captured_at": "2026-11-12T08:15:00Z", "status": "captured", "refund_id": None},
        {"id": "ch_d", "amount_cents": 2490, "currency": "EUR", "card": "visa 2", "captured_at": "2026-11-12T08:15:02Z", "status": "captured", "refund_id": None},
    ],
}


class FakeBilling:
    def __init__(self, refund_status=201):
        self.refunds = {}
        self.refund_status = refund_status

    def __call__(self, method, url, headers, body):
        if method == "GET" and "/charges?order=" in url:
            order = url.rsplit("=", 1)[1]
            return 200, [], json.dumps({"order": order, "charges": CHARGES.get(order, [])}).encode()
        if method == "POST" and url.endswith("/refunds"):
            request = json.loads(body)
            if self.refund_status != 201:
                return self.refund_status, [], b'{"error": "refund_declined", "message": "declined"}'
            known = request["idempotency_key"] in self.refunds
            refund = self.refunds.setdefault(
                request["idempotency_key"],
                {"id": "re_" + request["charge_id"], "charge_id": request["charge_id"], "amount_cents": 14900, "currency": "EUR"},
            )
            return (200 if known else 201), [], json.dumps(refund).encode()
        return 404, [], b'{"error": "not_found", "message": "no such route"}'


class Billing(unittest.TestCase):
    def host(self, **kw):
        return FakeHost(config={"base_url": "http://billing.test"}, http=FakeBilling(**kw))

    def test_schemas_are_closed(self):
        for name, _t, _d, schema, _o in app.plugin.specs():
            self.assertIs(json.loads(schema)["additionalProperties"], False, name)

    def test_finds_the_duplicate_and_refunds_it_once(self):
        host = self.host()
        check = host.call(app.plugin, "billing_duplicate_check", {"order": "88231"})
        self.assertEqual((check["duplicate"], check["keep"], check["extra"]), (True, "ch_a", "ch_b"))
        first = host.call(app.plugin, "billing_double_charge_refund", {"order": "88231", "ticket": "T-1046"})
        again = host.call(app.plugin, "billing_double_charge_refund", {"order": "88231"})
        self.assertEqual((first["refund_id"], first["repeated"]), ("re_ch_b", False))
        self.assertEqual((again["refund_id"], again["repeated"]), ("re_ch_b", True))
        self.assertEqual(len(host._http.refunds), 1)
        self.assertEqual(json.loads(host.state["refund/88231"])["refund_id"], "re_ch_b")

    def test_two_different_charges_are_no_duplicate(self):
        with self.assertRaises(ToolError) as caught:
            self.host().call(app.plugin, "billing_double_charge_refund", {"order": "88190"})
        self.assertEqual(caught.exception.code, "not_a_duplicate")
        self.assertIn("step 2 of 3", caught.exception.message)

    def test_a_declined_refund_names_the_step(self):
        with self.assertRaises(ToolError) as caught:
            self.host(refund_status=422).call(app.plugin, "billing_double_charge_refund", {"order": "88231"})
        self.assertEqual(caught.exception.code, "refund_failed")
        self.assertIn("step 3 of 3", caught.exception.message)

    def test_a_bad_order_number_is_refused(self):
        with self.assertRaises(ToolError) as caught:
            self.host().call(app.plugin, "billing_charge_list", {"order": "88231; DROP"})
        self.assertEqual(caught.exception.code, "invalid_arguments")


if __name__ == "__main__":
    unittest.main()
