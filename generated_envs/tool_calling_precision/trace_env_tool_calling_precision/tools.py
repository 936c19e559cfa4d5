"""Tools of the Retail target, for the `tool_calling_precision` training environment.

Tool names and parameters are those of tau2-bench retail; the implementations
are this package's own and act on the JSON state built by `generator.py`. Every
tool checks its preconditions before it touches the state, so a call that fails
with `ToolError` never changes it.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from collections.abc import Callable
from typing import Any

State = dict[str, Any]

POLICY = """\
# Retail store agent policy

You help customers of an online store with their own orders and profile: cancel or modify pending orders, return or exchange delivered orders, change the default address, and answer questions about their profile, orders and products.

## Identity and ownership

- Authenticate the customer first: find their user id with their email (find_user_id_by_email) or with their first name, last name and zip code (find_user_id_by_name_zip). Do this even if they give you a user id.
- Serve one customer per conversation. Act only on orders that belong to that customer: an order belongs to them when its user_id is their user id (it is listed in their profile). Refuse any action on another customer's order, and do not reveal its details.

## Before any change

- Writes are cancel, modify, return, exchange and address changes. Read the order (and the products involved) before changing it, and check the rules below.
- State the details of the change and get the customer's explicit confirmation (yes). A confirmation given in the customer's request for exactly that change counts.
- Make one tool call at a time, and do not talk to the customer in the same message as a tool call.
- Do not invent information; use what the customer and the tools tell you.

## Orders

- Status is one of pending, processed, delivered, cancelled, or a status set by a previous request (pending (item modified), return requested, exchange requested).
- A pending order can be cancelled, with the reason 'no longer needed' or 'ordered by mistake'. Its payments are refunded to the methods that paid them: at once to a gift card, in 5 to 7 business days otherwise.
- A pending order can have its shipping address changed, its payment method changed (a gift card must cover the total), and its items swapped for other available variants of the same product (only once; the price difference is paid or refunded on a payment method of the customer, a gift card must cover it). After an item swap it can no longer be cancelled or swapped again.
- A delivered order can be returned or exchanged, once. A return refunds the returned items' prices to the original payment method of the order (the first entry of its payment history) or to an existing gift card of the customer. An exchange swaps items for available variants of the same product; the customer pays or receives the price difference.
- Processed and cancelled orders cannot be changed.

## Products

- A product has variants; each variant (item id) has options, an availability flag and a price. Only available variants can be ordered. Product ids and item ids are different things.
- When the customer asks for the cheapest variant with some option, compare only the variants that have that option and are available.

## Telling the customer

- After acting, tell the customer what was done and the amounts involved (refunds, charges, price differences), in dollars.
- Transfer to a human agent (transfer_to_human_agents) only if the customer asks for one or the request cannot be handled with these tools and rules."""

TOOL_SCHEMAS: list[dict[str, Any]] = json.loads(
    r"""
[
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an arithmetic expression made of numbers, + - * /, parentheses and spaces; the result is rounded to 2 decimals.",
            "parameters": {
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": "The expression, for example '(19.99 + 5) * 2'."
                    }
                },
                "required": [
                    "expression"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "cancel_pending_order",
            "description": "Cancel an order whose status is 'pending'. Every payment of the order is refunded to the method that paid it (gift cards at once, other methods in 5 to 7 business days). Confirm the details with the user before calling.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {
                        "type": "string",
                        "description": "The order id, starting with '#W', for example '#W0000000'."
                    },
                    "reason": {
                        "type": "string",
                        "description": "Why the order is cancelled: 'no longer needed' or 'ordered by mistake'."
                    }
                },
                "required": [
                    "order_id",
                    "reason"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "exchange_delivered_order_items",
            "description": "Request an exchange of delivered items for other available variants of the same products. The price difference is charged to or refunded on the given payment method. A delivered order can be returned or exchanged only once. Confirm the details with the user before calling.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {
                        "type": "string",
                        "description": "The order id, starting with '#W', for example '#W0000000'."
                    },
                    "item_ids": {
                        "type": "array",
                        "items": {
                            "type": "string"
                        },
                        "description": "Item ids (variant ids, not product ids) of items in the order; list an id twice to act on two identical items."
                    },
                    "new_item_ids": {
                        "type": "array",
                        "items": {
                            "type": "string"
                        },
                        "description": "The replacement item ids, one per entry of item_ids at the same position and of the same product."
                    },
                    "payment_method_id": {
                        "type": "string",
                        "description": "Id of a payment method on the order owner's profile, for example 'credit_card_0000000' or 'gift_card_0000000'."
                    }
                },
                "required": [
                    "order_id",
                    "item_ids",
                    "new_item_ids",
                    "payment_method_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "find_user_id_by_email",
            "description": "Look up a customer's user id from their email address.",
            "parameters": {
                "type": "object",
                "properties": {
                    "email": {
                        "type": "string",
                        "description": "The email address, for example 'jane.roe1234@example.com'."
                    }
                },
                "required": [
                    "email"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "find_user_id_by_name_zip",
            "description": "Look up a customer's user id from their first name, last name and the zip code of their default address. Prefer the email lookup when the user has an email.",
            "parameters": {
                "type": "object",
                "properties": {
                    "first_name": {
                        "type": "string",
                        "description": "First name, for example 'Jane'."
                    },
                    "last_name": {
                        "type": "string",
                        "description": "Last name, for example 'Roe'."
                    },
                    "zip": {
                        "type": "string",
                        "description": "Zip code, for example '73301'."
                    }
                },
                "required": [
                    "first_name",
                    "last_name",
                    "zip"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_order_details",
            "description": "Show an order: owner, address, items, status, fulfillments and payment history.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {
                        "type": "string",
                        "description": "The order id, starting with '#W', for example '#W0000000'."
                    }
                },
                "required": [
                    "order_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_product_details",
            "description": "Show a product and all its variants, each with its options, availability and price.",
            "parameters": {
                "type": "object",
                "properties": {
                    "product_id": {
                        "type": "string",
                        "description": "The product id, for example '1234567890'. It is not an item id."
                    }
                },
                "required": [
                    "product_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_user_details",
            "description": "Show a customer's profile: name, email, default address, payment methods and order ids.",
            "parameters": {
                "type": "object",
                "properties": {
                    "user_id": {
                        "type": "string",
                        "description": "The user id, for example 'jane_roe_1234'."
                    }
                },
                "required": [
                    "user_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "list_all_product_types",
            "description": "List every product type of the store as a JSON object mapping product name to product id.",
            "parameters": {
                "type": "object",
                "properties": {},
                "required": []
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "modify_pending_order_address",
            "description": "Change the shipping address of a pending order. Confirm the details with the user before calling.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {
                        "type": "string",
                        "description": "The order id, starting with '#W', for example '#W0000000'."
                    },
                    "address1": {
                        "type": "string",
                        "description": "First address line, for example '12 Elm Street'."
                    },
                    "address2": {
                        "type": "string",
                        "description": "Second address line, for example 'Apt 4'; an empty string if none."
                    },
                    "city": {
                        "type": "string",
                        "description": "City, for example 'Austin'."
                    },
                    "state": {
                        "type": "string",
                        "description": "State code, for example 'TX'."
                    },
                    "country": {
                        "type": "string",
                        "description": "Country, for example 'USA'."
                    },
                    "zip": {
                        "type": "string",
                        "description": "Zip code, for example '73301'."
                    }
                },
                "required": [
                    "order_id",
                    "address1",
                    "address2",
                    "city",
                    "state",
                    "country",
                    "zip"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "modify_pending_order_items",
            "description": "Swap items of a pending order for other available variants of the same products; this can be done once per order. The price difference is charged to or refunded on the given payment method. Confirm the details with the user before calling.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {
                        "type": "string",
                        "description": "The order id, starting with '#W', for example '#W0000000'."
                    },
                    "item_ids": {
                        "type": "array",
                        "items": {
                            "type": "string"
                        },
                        "description": "Item ids (variant ids, not product ids) of items in the order; list an id twice to act on two identical items."
                    },
                    "new_item_ids": {
                        "type": "array",
                        "items": {
                            "type": "string"
                        },
                        "description": "The new item ids, one per entry of item_ids at the same position, each a different variant of the same product."
                    },
                    "payment_method_id": {
                        "type": "string",
                        "description": "Id of a payment method on the order owner's profile, for example 'credit_card_0000000' or 'gift_card_0000000'."
                    }
                },
                "required": [
                    "order_id",
                    "item_ids",
                    "new_item_ids",
                    "payment_method_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "modify_pending_order_payment",
            "description": "Pay a pending order with another payment method of its owner; the old method is refunded. Confirm the details with the user before calling.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {
                        "type": "string",
                        "description": "The order id, starting with '#W', for example '#W0000000'."
                    },
                    "payment_method_id": {
                        "type": "string",
                        "description": "Id of a payment method on the order owner's profile, for example 'credit_card_0000000' or 'gift_card_0000000'."
                    }
                },
                "required": [
                    "order_id",
                    "payment_method_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "modify_user_address",
            "description": "Change a customer's default address. Confirm the details with the user before calling.",
            "parameters": {
                "type": "object",
                "properties": {
                    "user_id": {
                        "type": "string",
                        "description": "The user id, for example 'jane_roe_1234'."
                    },
                    "address1": {
                        "type": "string",
                        "description": "First address line, for example '12 Elm Street'."
                    },
                    "address2": {
                        "type": "string",
                        "description": "Second address line, for example 'Apt 4'; an empty string if none."
                    },
                    "city": {
                        "type": "string",
                        "description": "City, for example 'Austin'."
                    },
                    "state": {
                        "type": "string",
                        "description": "State code, for example 'TX'."
                    },
                    "country": {
                        "type": "string",
                        "description": "Country, for example 'USA'."
                    },
                    "zip": {
                        "type": "string",
                        "description": "Zip code, for example '73301'."
                    }
                },
                "required": [
                    "user_id",
                    "address1",
                    "address2",
                    "city",
                    "state",
                    "country",
                    "zip"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "return_delivered_order_items",
            "description": "Request the return of items of a delivered order. The refund goes to the original payment method of the order or to a gift card of its owner. Confirm the details with the user before calling.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {
                        "type": "string",
                        "description": "The order id, starting with '#W', for example '#W0000000'."
                    },
                    "item_ids": {
                        "type": "array",
                        "items": {
                            "type": "string"
                        },
                        "description": "Item ids (variant ids, not product ids) of items in the order; list an id twice to act on two identical items."
                    },
                    "payment_method_id": {
                        "type": "string",
                        "description": "Where the refund goes: the order's original payment method or a gift card of the owner, for example 'credit_card_0000000'."
                    }
                },
                "required": [
                    "order_id",
                    "item_ids",
                    "payment_method_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "transfer_to_human_agents",
            "description": "Hand the conversation to a human agent, with a summary of the issue. Only when the user asks for one or the request is outside what the tools and policy allow.",
            "parameters": {
                "type": "object",
                "properties": {
                    "summary": {
                        "type": "string",
                        "description": "A short summary of the user's issue."
                    }
                },
                "required": [
                    "summary"
                ]
            }
        }
    }
]
"""
)


class ToolError(Exception):
    """A tool call the environment refuses; its message is sent back to the agent."""


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


_ARITHMETIC_CHARS = frozenset("0123456789+-*/(). ")
_OPERATORS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _arithmetic(node: ast.AST) -> float:
    """Evaluate a parsed + - * / expression; any other construct is refused."""
    if isinstance(node, ast.Expression):
        return _arithmetic(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _arithmetic(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](
            _arithmetic(node.left), _arithmetic(node.right)
        )
    raise ToolError(
        "the expression may only combine numbers with + - * / and parentheses"
    )


def calculate(state: State, expression: str) -> str:
    """Evaluate an arithmetic expression, rounded to 2 decimals (no eval: ast only)."""
    if not expression.strip() or not set(expression) <= _ARITHMETIC_CHARS:
        raise ToolError(
            "the expression may contain only numbers, + - * /, parentheses and spaces"
        )
    try:
        value = _arithmetic(ast.parse(expression, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        raise ToolError(f"cannot evaluate the expression '{expression[:60]}'") from None
    if not math.isfinite(value):
        raise ToolError("the result is not a finite number")
    return str(round(value, 2))


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


_FUNCTIONS: dict[str, dict[str, Any]] = {
    schema["function"]["name"]: schema["function"] for schema in TOOL_SCHEMAS
}

# JSON-schema types of tool parameters. Checked by hand because the package
# depends on gymnasium only; the schemas use just these keywords.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _has_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, _JSON_TYPES[kind])


def check_value(value: Any, schema: dict[str, Any], path: str) -> None:
    """Raise `ToolError` naming `path` when `value` does not fit `schema`."""
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_has_type(value, k) for k in kinds):
            raise ToolError(
                f"argument '{path}' must be of type {' or '.join(kinds)}, "
                f"got {type(value).__name__}"
            )
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"argument '{path}' must be one of {schema['enum']}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            check_value(item, schema["items"], f"{path}[{index}]")
    if isinstance(value, dict) and "properties" in schema:
        check_object(value, schema, path)


def check_object(value: dict[str, Any], schema: dict[str, Any], path: str) -> None:
    """Check required, unknown and typed fields of a JSON object argument."""
    properties = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    missing = [key for key in schema.get("required", []) if key not in value]
    if missing:
        raise ToolError(f"missing required argument(s): {prefix}{', '.join(missing)}")
    unknown = [key for key in value if key not in properties]
    if unknown:
        raise ToolError(
            f"unknown argument(s) {', '.join(prefix + key for key in unknown)}; "
            f"allowed: {', '.join(properties) or 'none'}"
        )
    for key, item in value.items():
        check_value(item, properties[key], prefix + key)


def call_tool(state: State, name: str, arguments: Any) -> Any:
    """Check a tool call against its schema, run it on `state`, return its raw result.

    `arguments` is the call's JSON string (as in an OpenAI tool call) or a dict.
    Raises `ToolError` for an unknown tool, bad arguments or a refused action.
    """
    function = _FUNCTIONS.get(name)
    if function is None:
        raise ToolError(f"unknown tool '{name}'; available: {', '.join(_FUNCTIONS)}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(arguments, dict):
        raise ToolError("arguments must be a JSON object")
    check_object(arguments, function["parameters"], "")
    return IMPLEMENTATIONS[name](state, **arguments)


def execute(state: State, name: str, arguments: Any) -> str:
    """Run one tool call and return the tool message content: text as is, else JSON."""
    result = call_tool(state, name, arguments)
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=True)
