"""Tool implementations of the Retail kit, named and typed as tau2-bench retail.

Each tool does what tau2-bench's own retail tool does, with its error messages
and result fields: tests/factory/test_tau2_differential.py runs the same calls through
both. Like tau2, the tools check data (ids, statuses, balances) but leave
policy (confirmation, one modification per order) to the agent. Every tool
checks before it touches the state, so a call that fails with `ToolError`
never changes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...schema import ToolError
from ...toolkit import State
from ..calculator import calculate

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def _user(state: State, user_id: str) -> dict[str, Any]:
    user = state["users"].get(user_id)
    if user is None:
        raise ToolError("User not found")
    return user


def _order(state: State, order_id: str) -> dict[str, Any]:
    order = state["orders"].get(order_id)
    if order is None:
        raise ToolError("Order not found")
    return order


def _product(state: State, product_id: str) -> dict[str, Any]:
    product = state["products"].get(product_id)
    if product is None:
        raise ToolError("Product not found")
    return product


def _variant(state: State, product_id: str, item_id: str) -> dict[str, Any]:
    variant = _product(state, product_id)["variants"].get(item_id)
    if variant is None:
        raise ToolError("Variant not found")
    return variant


def _payment_method(state: State, user_id: str, method_id: str) -> dict[str, Any]:
    method = _user(state, user_id)["payment_methods"].get(method_id)
    if method is None:
        raise ToolError("Payment method not found")
    return method


def _address(
    address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> dict[str, str]:
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "country": country,
        "state": state,
        "zip": zip,
    }


def _check_counts(order: dict[str, Any], item_ids: list[str], problem: str) -> None:
    """Each listed item id appears in the order at least as often as it is listed."""
    ordered = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > ordered.count(item_id):
            raise ToolError(problem.format(item_id=item_id))


def _first_item(order: dict[str, Any], item_id: str) -> dict[str, Any]:
    item = next((item for item in order["items"] if item["item_id"] == item_id), None)
    if item is None:
        raise ToolError(f"Item {item_id} not found")
    return item


def _replacement(
    state: State, item: dict[str, Any], new_item_id: str
) -> dict[str, Any]:
    """The available variant `new_item_id` of the item's product."""
    variant = _variant(state, item["product_id"], new_item_id)
    if not variant["available"]:
        raise ToolError(f"New item {new_item_id} not found or available")
    return variant


def _gift_card_covers(method: dict[str, Any], amount: float, problem: str) -> None:
    if method["source"] == "gift_card" and method["balance"] < amount:
        raise ToolError(problem)


def cancel_pending_order(state: State, order_id: str, reason: str) -> dict[str, Any]:
    """Cancel a pending order and refund every payment to its method."""
    order = _order(state, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError("Invalid reason")
    history = order["payment_history"]
    methods = [
        _payment_method(state, order["user_id"], payment["payment_method_id"])
        for payment in history
    ]
    refunds = [
        {
            "transaction_type": "refund",
            "amount": payment["amount"],
            "payment_method_id": payment["payment_method_id"],
        }
        for payment in history
    ]
    for payment, method in zip(history, methods, strict=True):
        if method["source"] == "gift_card":
            method["balance"] = round(method["balance"] + payment["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    history.extend(refunds)
    return order


def exchange_delivered_order_items(
    state: State,
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
) -> dict[str, Any]:
    """Request an exchange of delivered items for available variants."""
    order = _order(state, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be exchanged")
    _check_counts(order, item_ids, "Number of {item_id} not found.")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match.")
    difference: float = 0  # an int when nothing changes, as in tau2
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = _first_item(order, item_id)
        difference += _replacement(state, item, new_item_id)["price"] - item["price"]
    difference = round(difference, 2)
    method = _payment_method(state, order["user_id"], payment_method_id)
    _gift_card_covers(
        method,
        difference,
        "Insufficient gift card balance to pay for the price difference",
    )
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = difference
    return order


def find_user_id_by_email(state: State, email: str) -> str:
    """The user id whose email matches (case-insensitive)."""
    for user_id, user in state["users"].items():
        if user["email"].lower() == email.lower():
            return user_id
    raise ToolError("User not found")


def find_user_id_by_name_zip(
    state: State, first_name: str, last_name: str, zip: str
) -> str:
    """The user id with this name (case-insensitive) and default-address zip code."""
    for user_id, user in state["users"].items():
        name = user["name"]
        if (
            name["first_name"].lower() == first_name.lower()
            and name["last_name"].lower() == last_name.lower()
            and user["address"]["zip"] == zip
        ):
            return user_id
    raise ToolError("User not found")


def get_order_details(state: State, order_id: str) -> dict[str, Any]:
    """The whole order record."""
    return _order(state, order_id)


def get_product_details(state: State, product_id: str) -> dict[str, Any]:
    """The product with all its variants."""
    return _product(state, product_id)


def get_user_details(state: State, user_id: str) -> dict[str, Any]:
    """The whole user record."""
    return _user(state, user_id)


def list_all_product_types(state: State) -> str:
    """Product names mapped to product ids, as tau2's JSON text sorted by name."""
    types = {product["name"]: key for key, product in state["products"].items()}
    return json.dumps(types, sort_keys=True)


def modify_pending_order_address(
    db: State,
    /,
    order_id: str,
    address1: str,
    address2: str,
    city: str,
    state: str,
    country: str,
    zip: str,
) -> dict[str, Any]:
    """Replace the shipping address of a pending order.

    The world comes first and positional-only (`db`) because the benchmark's
    address tools have a parameter called `state`.
    """
    order = _order(db, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    order["address"] = _address(address1, address2, city, state, country, zip)
    return order


def modify_pending_order_items(
    state: State,
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
) -> dict[str, Any]:
    """Swap items of a pending order for available variants of the same products.

    Each item takes its own variant's price and options; tau2 gives every item
    the last variant's (a bug listed in README).
    """
    order = _order(state, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be modified")
    _check_counts(order, item_ids, "{item_id} not found")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match")
    difference: float = 0  # not rounded, as in tau2
    variants = []
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        if item_id == new_item_id:
            raise ToolError("The new item id should be different from the old item id")
        item = _first_item(order, item_id)
        variants.append(_replacement(state, item, new_item_id))
        difference += variants[-1]["price"] - item["price"]
    method = _payment_method(state, order["user_id"], payment_method_id)
    _gift_card_covers(
        method, difference, "Insufficient gift card balance to pay for the new item"
    )
    order["payment_history"].append(
        {
            "transaction_type": "payment" if difference > 0 else "refund",
            "amount": float(abs(difference)),
            "payment_method_id": payment_method_id,
        }
    )
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - difference, 2)
    for item_id, variant in zip(item_ids, variants, strict=True):
        item = _first_item(order, item_id)
        item["item_id"] = variant["item_id"]
        item["price"] = variant["price"]
        item["options"] = dict(variant["options"])
    order["status"] = "pending (item modified)"
    return order


def modify_pending_order_payment(
    state: State, order_id: str, payment_method_id: str
) -> dict[str, Any]:
    """Pay a pending order with another method of its owner and refund the old one."""
    order = _order(state, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    method = _payment_method(state, order["user_id"], payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolError("There should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise ToolError(
            "The new payment method should be different from the current one"
        )
    amount = history[0]["amount"]
    _gift_card_covers(
        method, amount, "Insufficient gift card balance to pay for the order"
    )
    old_method = _payment_method(state, order["user_id"], old_id)
    history.append(
        {
            "transaction_type": "payment",
            "amount": amount,
            "payment_method_id": payment_method_id,
        }
    )
    history.append(
        {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id}
    )
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - amount, 2)
    if old_method["source"] == "gift_card":
        old_method["balance"] = round(old_method["balance"] + amount, 2)
    return order


def modify_user_address(
    db: State,
    /,
    user_id: str,
    address1: str,
    address2: str,
    city: str,
    state: str,
    country: str,
    zip: str,
) -> dict[str, Any]:
    """Replace a user's default address (`db` as in modify_pending_order_address)."""
    user = _user(db, user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    return user


def return_delivered_order_items(
    state: State, order_id: str, item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    """Request a return; the refund goes to the original method or a gift card."""
    order = _order(state, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be returned")
    method = _payment_method(state, order["user_id"], payment_method_id)
    original = order["payment_history"][0]["payment_method_id"]
    if method["source"] != "gift_card" and payment_method_id != original:
        raise ToolError("Payment method should be the original payment method")
    _check_counts(order, item_ids, "Some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return order


def transfer_to_human_agents(state: State, summary: str) -> str:
    """Hand the conversation over to a human agent."""
    return "Transfer successful"


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "calculate": calculate,
    "cancel_pending_order": cancel_pending_order,
    "exchange_delivered_order_items": exchange_delivered_order_items,
    "find_user_id_by_email": find_user_id_by_email,
    "find_user_id_by_name_zip": find_user_id_by_name_zip,
    "get_order_details": get_order_details,
    "get_product_details": get_product_details,
    "get_user_details": get_user_details,
    "list_all_product_types": list_all_product_types,
    "modify_pending_order_address": modify_pending_order_address,
    "modify_pending_order_items": modify_pending_order_items,
    "modify_pending_order_payment": modify_pending_order_payment,
    "modify_user_address": modify_user_address,
    "return_delivered_order_items": return_delivered_order_items,
    "transfer_to_human_agents": transfer_to_human_agents,
}
