"""The billing plugin: what the helpdesk may do about a customer's card
charges, written in Python on the toolhost SDK.

It follows the adapter pattern: instead of one tool per upstream call, the
write tool is the business action the helpdesk means ("refund the double
charge of order 88231"), composed of its steps: find the order's charges,
check that two of them are a duplicate, refund the later one. The upstream
is the back office's billing API; the plugin reaches it only through the
host, which holds the token and adds it to each request.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal, Optional
from urllib.parse import quote

from toolhost import Context, Length, Pattern, Plugin, ToolError, config, http, log, state

plugin = Plugin()

# Two charges are one duplicate when the processor captured the same amount
# from the same card this close together.
DUPLICATE_WINDOW_SECONDS = 10 * 60

Order = Annotated[
    str,
    Length(max=8),
    Pattern("^[0-9]{5,8}$"),
    "the order number, 5 to 8 digits, as the customer's ticket or statement gives it",
]


@dataclass
class OrderArgs:
    order: Order


@dataclass
class RefundArgs:
    order: Order
    ticket: Annotated[
        Optional[str],
        Length(max=6),
        Pattern("^T-[0-9]{4}$"),
        "the helpdesk ticket's id (T- and four digits) the refund answers, kept in the refund's reason",
    ] = None


@dataclass
class ChargeRow:
    id: str
    amount_cents: int
    currency: str
    card: str
    captured_at: str
    status: Literal["captured", "refunded"]


@dataclass
class Charges:
    order: str
    total: int
    charges: list[ChargeRow]


@dataclass
class DuplicateCheck:
    order: str
    duplicate: bool
    reason: str
    keep: Optional[str] = None
    extra: Optional[str] = None


@dataclass
class Refunded:
    order: str
    charge_id: str
    refund_id: str
    amount_cents: int
    currency: str
    repeated: bool


def _base_url() -> str:
    return config.require("base_url").rstrip("/")


def _fetch_charges(order: str, step: str) -> list:
    """Step 1: the order's charges from the billing API."""
    try:
        response = http.get(f"{_base_url()}/charges?order={quote(order)}")
    except http.HttpError as error:
        raise ToolError("charges_lookup_failed", f"{step} failed: {error.message}", error.retryable) from None
    if response.status != 200:
        raise ToolError(
            "charges_lookup_failed",
            f"{step} failed: the billing API answered {response.status} ({_upstream_error(response)})",
            response.status >= 500,
        )
    body = response.json()
    charges = body.get("charges") if isinstance(body, dict) else None
    if not isinstance(charges, list):
        raise ToolError("charges_lookup_failed", f"{step} failed: the billing API's answer has no charge list", True)
    return charges


def _upstream_error(response: http.Response) -> str:
    try:
        body = response.json()
        return f"{body.get('error')}: {body.get('message')}"
    except ToolError:
        return response.text()[:200]


def _check(order: str, charges: list) -> DuplicateCheck:
    """Step 2: is there exactly one duplicate among the captured charges?"""
    captured = sorted((c for c in charges if c.get("status") == "captured"), key=lambda c: c["captured_at"])
    pairs = []
    for i, first in enumerate(captured):
        for later in captured[i + 1 :]:
            same = first["amount_cents"] == later["amount_cents"] and first["card"] == later["card"]
            gap = _seconds(later["captured_at"]) - _seconds(first["captured_at"])
            if same and 0 <= gap <= DUPLICATE_WINDOW_SECONDS:
                pairs.append((first, later))
    if not charges:
        return DuplicateCheck(order, False, "the order has no charges")
    if not pairs:
        return DuplicateCheck(
            order,
            False,
            f"no two captured charges of this order have the same amount and card within {DUPLICATE_WINDOW_SECONDS // 60} minutes",
        )
    if len(pairs) > 1:
        return DuplicateCheck(order, False, "more than one possible duplicate; a person in billing must decide which to refund")
    keep, extra = pairs[0]
    return DuplicateCheck(
        order,
        True,
        f"{extra['id']} repeats {keep['id']}: {keep['amount_cents'] / 100:.2f} {keep['currency']} "
        f"from {keep['card']}, {int(_seconds(extra['captured_at']) - _seconds(keep['captured_at']))} s apart",
        keep["id"],
        extra["id"],
    )


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _already_refunded(charges: list) -> Optional[dict]:
    """A refunded charge that equals a captured one: the duplicate was
    refunded before (by an earlier call of this tool, or by a person)."""
    captured = [c for c in charges if c.get("status") == "captured"]
    for c in charges:
        if c.get("status") == "refunded" and c.get("refund_id") and any(
            k["amount_cents"] == c["amount_cents"] and k["card"] == c["card"] for k in captured
        ):
            return c
    return None


@plugin.tool(
    title="List an order's charges",
    description="Lists the card charges of one order: amount in cents, card, capture time and whether it was "
    "refunded. Reads the billing system; changes nothing.",
)
def billing_charge_list(ctx: Context, args: OrderArgs) -> Charges:
    charges = _fetch_charges(args.order, "finding the charges")
    rows = [
        ChargeRow(c["id"], c["amount_cents"], c["currency"], c["card"], c["captured_at"], c["status"])
        for c in charges[:50]
    ]
    return Charges(args.order, len(charges), rows)


@plugin.tool(
    title="Check an order for a double charge",
    description="Checks whether an order was charged twice: two captured charges of the same amount from the "
    "same card within 10 minutes. Says which charge to keep and which is the duplicate. Changes nothing.",
)
def billing_duplicate_check(ctx: Context, args: OrderArgs) -> DuplicateCheck:
    return _check(args.order, _fetch_charges(args.order, "finding the charges"))


@plugin.tool(
    title="Refund a double charge",
    description="Refunds the duplicate of a double-charged order to the card it came from, in three steps: finds "
    "the order's charges, checks that exactly one is a duplicate, refunds that one. Calling it again for the same "
    "order refunds nothing more and returns the same refund. Fails, naming the step, when there is no duplicate or "
    "the refund is declined.",
)
def billing_double_charge_refund(ctx: Context, args: RefundArgs) -> Refunded:
    # What this plugin refunded is kept in the host's store, so a repeated
    # call is answered without touching the billing API at all.
    done = state.get_json(f"refund/{args.order}")
    if done is not None:
        return Refunded(args.order, done["charge_id"], done["refund_id"], done["amount_cents"], done["currency"], True)
    charges = _fetch_charges(args.order, "step 1 of 3 (finding the charges)")
    before = _already_refunded(charges)
    found = _check(args.order, charges)
    if not found.duplicate:
        if before is not None:
            return Refunded(args.order, before["id"], before["refund_id"], before["amount_cents"], before["currency"], True)
        raise ToolError("not_a_duplicate", f"step 2 of 3 (checking for a duplicate) refunded nothing: {found.reason}")
    reason = f"duplicate of {found.keep}" + (f", ticket {args.ticket}" if args.ticket else "")
    # The key is the same for every call about this charge, so a retry after
    # a lost answer gets the first refund back instead of a second one.
    body = {"charge_id": found.extra, "idempotency_key": f"double-charge-{args.order}-{found.extra}", "reason": reason}
    try:
        response = http.send_json("POST", f"{_base_url()}/refunds", body)
    except http.HttpError as error:
        raise ToolError(
            "refund_failed",
            f"step 3 of 3 (refunding {found.extra}) failed: {error.message}; whether the refund happened is unknown, "
            "so call this tool again, which never refunds twice",
            True,
        ) from None
    if response.status not in (200, 201):
        raise ToolError(
            "refund_failed",
            f"step 3 of 3 (refunding {found.extra}) failed, nothing was refunded: {_upstream_error(response)}",
            response.status >= 500,
        )
    # The money has moved: from here on, nothing may report the refund as
    # not done.
    try:
        refund = response.json()
        done = Refunded(
            args.order,
            found.extra,
            str(refund["id"]),
            int(refund["amount_cents"]),
            str(refund["currency"]),
            response.status == 200,
        )
    except (ToolError, KeyError, TypeError, ValueError):
        raise ToolError(
            "refund_failed",
            f"step 3 of 3 (refunding {found.extra}): the billing API accepted the refund but its answer could not "
            "be read; call this tool again, which never refunds twice, to get the refund",
            True,
        ) from None
    log.info(f"order {args.order}: refunded {found.extra} as {done.refund_id} (session {ctx.session_id})")
    record = {
        "charge_id": done.charge_id,
        "refund_id": done.refund_id,
        "amount_cents": done.amount_cents,
        "currency": done.currency,
        "ticket": args.ticket,
        "call_id": ctx.call_id,
    }
    try:
        state.set_json(f"refund/{args.order}", record)
    except ToolError as error:
        # Only the shortcut for repeated calls is lost; the billing API's
        # idempotency key still prevents a second refund.
        log.warn(f"order {args.order}: refund {done.refund_id} not recorded in state: {error.code}")
    return done


# The component's `tools` export.
Tools = plugin.exports()
