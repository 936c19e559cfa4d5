"""Tool implementations of the Retail kit, named and typed as tau2-bench retail.

Every tool checks its preconditions before it touches the state, so a call
that fails with `ToolError` never changes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...schema import ToolError
from ...toolkit import State
from ..calculator import calculate

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def _user(state: State, user_id: str) -> dict[str, Any]:
    user = state["users"].get(user_id)
    if user is None:
        raise ToolError(f"user '{user_id}' not found")
    return user


def _order(state: State, order_id: str) -> dict[str, Any]:
    order = state["orders"].get(order_id)
    if order is None:
        raise ToolError(f"order '{order_id}' not found")
    return order


def _product(state: State, product_id: str) -> dict[str, Any]:
    product = state["products"].get(product_id)
    if product is None:
        raise ToolError(f"product '{product_id}' not found")
    return product


def _payment_method(state: State, user_id: str, method_id: str) -> dict[str, Any]:
    method = _user(state, user_id)["payment_methods"].get(method_id)
    if method is None:
        raise ToolError(f"payment method '{method_id}' not found for user '{user_id}'")
    return method


def _address(
    address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> dict[str, str]:
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "state": state,
        "country": country,
        "zip": zip,
    }


def _item_positions(order: dict[str, Any], item_ids: list[str]) -> list[int]:
    """Positions in the order of the listed items (duplicates take distinct items)."""
    if not item_ids:
        raise ToolError("item_ids must list at least one item")
    positions: list[int] = []
    for item_id in item_ids:
        position = next(
            (
                index
                for index, item in enumerate(order["items"])
                if item["item_id"] == item_id and index not in positions
            ),
            None,
        )
        if position is None:
            raise ToolError(
                f"item '{item_id}' is not in order {order['order_id']} "
                f"(or is listed more times than it was ordered)"
            )
        positions.append(position)
    return positions


def _new_variants(
    state: State,
    order: dict[str, Any],
    positions: list[int],
    new_item_ids: list[str],
) -> list[dict[str, Any]]:
    """The available replacement variants, each of the same product as its item."""
    if len(new_item_ids) != len(positions):
        raise ToolError("item_ids and new_item_ids must have the same length")
    variants = []
    for position, new_item_id in zip(positions, new_item_ids, strict=True):
        item = order["items"][position]
        if new_item_id == item["item_id"]:
            raise ToolError(f"new item '{new_item_id}' is the same as the old item")
        product = _product(state, item["product_id"])
        variant = product["variants"].get(new_item_id)
        if variant is None:
            raise ToolError(
                f"item '{new_item_id}' is not a variant of product "
                f"{item['product_id']} ({item['name']})"
            )
        if not variant["available"]:
            raise ToolError(f"item '{new_item_id}' is not available")
        variants.append(variant)
    return variants


def _price_difference(
    order: dict[str, Any], positions: list[int], variants: list[dict[str, Any]]
) -> float:
    old = sum(order["items"][position]["price"] for position in positions)
    new = sum(variant["price"] for variant in variants)
    return round(new - old, 2)


def cancel_pending_order(state: State, order_id: str, reason: str) -> dict[str, Any]:
    """Cancel a pending order and refund what each payment method paid for it."""
    order = _order(state, order_id)
    if order["status"] != "pending":
        raise ToolError(f"order {order_id} is '{order['status']}', not 'pending'")
    if reason not in CANCEL_REASONS:
        raise ToolError(f"reason must be one of {list(CANCEL_REASONS)}")
    paid: dict[str, float] = {}
    for entry in order["payment_history"]:
        sign = 1 if entry["transaction_type"] == "payment" else -1
        method_id = entry["payment_method_id"]
        paid[method_id] = paid.get(method_id, 0.0) + sign * entry["amount"]
    methods = {
        method_id: _payment_method(state, order["user_id"], method_id)
        for method_id in paid
    }
    refunds = [
        {
            "transaction_type": "refund",
            "amount": round(amount, 2),
            "payment_method_id": key,
        }
        for key, amount in paid.items()
        if round(amount, 2) > 0
    ]
    for refund in refunds:
        method = methods[refund["payment_method_id"]]
        if method["source"] == "gift_card":
            method["balance"] = round(method["balance"] + refund["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
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
        raise ToolError(f"order {order_id} is '{order['status']}', not 'delivered'")
    positions = _item_positions(order, item_ids)
    variants = _new_variants(state, order, positions, new_item_ids)
    difference = _price_difference(order, positions, variants)
    method = _payment_method(state, order["user_id"], payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < difference:
        raise ToolError("the gift card balance does not cover the price difference")
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
    raise ToolError("no user with this email")


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
    raise ToolError("no user with this name and zip code")


def get_order_details(state: State, order_id: str) -> dict[str, Any]:
    """The whole order record."""
    return _order(state, order_id)


def get_product_details(state: State, product_id: str) -> dict[str, Any]:
    """The product with all its variants."""
    return _product(state, product_id)


def get_user_details(state: State, user_id: str) -> dict[str, Any]:
    """The whole user record."""
    return _user(state, user_id)


def list_all_product_types(state: State) -> dict[str, str]:
    """Product names mapped to product ids, sorted by name."""
    types = {product["name"]: key for key, product in state["products"].items()}
    return dict(sorted(types.items()))


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
        raise ToolError(f"order {order_id} is '{order['status']}', not pending")
    order["address"] = _address(address1, address2, city, state, country, zip)
    return order


def modify_pending_order_items(
    state: State,
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
) -> dict[str, Any]:
    """Swap items of a pending order for available variants of the same products."""
    order = _order(state, order_id)
    if order["status"] != "pending":
        raise ToolError(
            f"order {order_id} is '{order['status']}'; items can be modified only "
            "once, on a 'pending' order"
        )
    positions = _item_positions(order, item_ids)
    variants = _new_variants(state, order, positions, new_item_ids)
    difference = _price_difference(order, positions, variants)
    method = _payment_method(state, order["user_id"], payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < difference:
        raise ToolError("the gift card balance does not cover the price difference")
    order["payment_history"].append(
        {
            "transaction_type": "payment" if difference > 0 else "refund",
            "amount": abs(difference),
            "payment_method_id": payment_method_id,
        }
    )
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - difference, 2)
    for position, variant in zip(positions, variants, strict=True):
        item = order["items"][position]
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
        raise ToolError(f"order {order_id} is '{order['status']}', not pending")
    method = _payment_method(state, order["user_id"], payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolError("only an order with exactly one payment can change its method")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise ToolError("the order is already paid with this payment method")
    old_method = _payment_method(state, order["user_id"], old_id)
    amount = history[0]["amount"]
    if method["source"] == "gift_card" and method["balance"] < amount:
        raise ToolError("the gift card balance does not cover the order total")
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
        raise ToolError(f"order {order_id} is '{order['status']}', not 'delivered'")
    method = _payment_method(state, order["user_id"], payment_method_id)
    history = order["payment_history"]
    original = history[0]["payment_method_id"] if history else None
    if method["source"] != "gift_card" and payment_method_id != original:
        raise ToolError(
            "the refund must go to the original payment method of the order "
            "or to a gift card"
        )
    _item_positions(order, item_ids)
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
