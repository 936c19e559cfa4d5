"""World builders of the Retail kit: seeded synthetic states shaped like tau2-bench retail."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from ...toolkit import State

FIRST_NAMES = (
    "Ava",
    "Liam",
    "Mia",
    "Noah",
    "Zoe",
    "Ethan",
    "Isla",
    "Omar",
    "Lena",
    "Yusuf",
    "Chen",
    "Sofia",
    "Mateo",
    "Priya",
    "Hugo",
    "Aisha",
)
LAST_NAMES = (
    "Garcia",
    "Kim",
    "Okafor",
    "Novak",
    "Silva",
    "Patel",
    "Moreau",
    "Jensen",
    "Rossi",
    "Tanaka",
    "Brown",
    "Haddad",
    "Lopez",
    "Schmidt",
)
STREETS = (
    "Maple Avenue",
    "Cedar Lane",
    "Hillside Drive",
    "Lake Street",
    "Elm Court",
    "River Road",
    "Sunset Boulevard",
    "Oak Street",
    "Willow Way",
    "Park Place",
)
CITIES = (
    ("Austin", "TX", "787"),
    ("Denver", "CO", "802"),
    ("Seattle", "WA", "981"),
    ("Boston", "MA", "021"),
    ("Phoenix", "AZ", "850"),
    ("Chicago", "IL", "606"),
    ("Portland", "OR", "972"),
    ("Atlanta", "GA", "303"),
    ("San Diego", "CA", "921"),
    ("Columbus", "OH", "432"),
)
CARD_BRANDS = ("visa", "mastercard", "amex", "discover")
# Product types: base price and option dimensions (each with at least 3 values).
PRODUCT_TYPES: dict[str, tuple[float, dict[str, tuple[str, ...]]]] = {
    "T-Shirt": (
        45.0,
        {
            "color": ("red", "blue", "black", "white", "green"),
            "size": ("S", "M", "L", "XL"),
            "material": ("cotton", "polyester", "linen"),
        },
    ),
    "Water Bottle": (
        30.0,
        {
            "capacity": ("500ml", "750ml", "1000ml"),
            "material": ("glass", "plastic", "stainless steel"),
            "color": ("blue", "green", "red", "black"),
        },
    ),
    "Office Chair": (
        320.0,
        {
            "material": ("fabric", "leather", "mesh"),
            "color": ("black", "gray", "blue", "white"),
            "armrest": ("none", "fixed", "adjustable"),
        },
    ),
    "Running Shoes": (
        110.0,
        {
            "size": ("8", "9", "10", "11", "12"),
            "color": ("black", "white", "red", "yellow"),
            "material": ("mesh", "leather", "synthetic"),
        },
    ),
    "Backpack": (
        85.0,
        {
            "color": ("black", "navy", "green", "gray"),
            "size": ("small", "medium", "large"),
            "material": ("nylon", "polyester", "leather"),
        },
    ),
    "Desk Lamp": (
        60.0,
        {
            "color": ("black", "white", "silver"),
            "brightness": ("low", "medium", "high"),
            "power source": ("USB", "AC adapter", "battery"),
        },
    ),
    "Headphones": (
        150.0,
        {
            "type": ("over-ear", "on-ear", "in-ear"),
            "connectivity": ("wired", "wireless", "hybrid"),
            "color": ("black", "white", "blue", "red"),
        },
    ),
    "Coffee Maker": (
        95.0,
        {
            "color": ("black", "stainless steel", "white"),
            "capacity": ("1 cup", "4 cups", "8 cups", "12 cups"),
            "type": ("drip", "espresso", "french press"),
        },
    ),
    "Yoga Mat": (
        40.0,
        {
            "thickness": ("4mm", "6mm", "8mm"),
            "material": ("PVC", "natural rubber", "TPE"),
            "color": ("pink", "green", "purple", "blue"),
        },
    ),
}


def new_world() -> State:
    """An empty store: products, users and orders keyed by their ids."""
    return {"products": {}, "users": {}, "orders": {}}


# tau2's optional order fields, None until a cancellation, exchange or return.
ORDER_REQUEST_FIELDS = (
    "cancel_reason",
    "exchange_items",
    "exchange_new_items",
    "exchange_payment_method_id",
    "exchange_price_difference",
    "return_items",
    "return_payment_method_id",
)


def used_ids(state: State) -> set[str]:
    """Every id already in the world (products, variants, users, methods, orders)."""
    ids = set(state["products"]) | set(state["users"]) | set(state["orders"])
    for product in state["products"].values():
        ids |= set(product["variants"])
    for user in state["users"].values():
        ids |= set(user["payment_methods"])
    return ids


def fresh_id(rng: random.Random, state: State, prefix: str, digits: int) -> str:
    """A new id `prefix` + `digits` random digits that the world does not use yet."""
    taken = used_ids(state)
    while True:
        candidate = prefix + "".join(rng.choice("0123456789") for _ in range(digits))
        if candidate not in taken:
            return candidate


def random_address(rng: random.Random) -> dict[str, str]:
    """A synthetic US address."""
    city, region, zip_prefix = rng.choice(CITIES)
    return {
        "address1": f"{rng.randint(10, 999)} {rng.choice(STREETS)}",
        "address2": rng.choice(
            ["", f"Apt {rng.randint(1, 40)}", f"Suite {rng.randint(100, 999)}"]
        ),
        "city": city,
        "country": "USA",
        "state": region,
        "zip": f"{zip_prefix}{rng.randint(10, 99)}",
    }


def add_product(
    state: State,
    rng: random.Random,
    name: str,
    variants: list[tuple[dict[str, str], float, bool]],
) -> str:
    """Add a product with the given (options, price, available) variants; its id."""
    product_id = fresh_id(rng, state, "", 10)
    product: dict[str, Any] = {"name": name, "product_id": product_id, "variants": {}}
    state["products"][product_id] = product
    for options, price, available in variants:
        item_id = fresh_id(rng, state, "", 10)
        product["variants"][item_id] = {
            "item_id": item_id,
            "options": dict(options),
            "available": available,
            "price": round(price, 2),
        }
    return product_id


def option_combinations(
    name: str, fixed: Mapping[str, str] | None = None
) -> list[dict[str, str]]:
    """Every option combination of a product type, keeping the `fixed` options."""
    combos: list[dict[str, str]] = [{}]
    for dimension, values in PRODUCT_TYPES[name][1].items():
        if fixed and dimension in fixed:
            values = (fixed[dimension],)
        combos = [{**combo, dimension: value} for combo in combos for value in values]
    return combos


def variant_price(rng: random.Random, name: str) -> float:
    """A plausible price for a variant of product type `name`."""
    return round(PRODUCT_TYPES[name][0] * rng.uniform(0.75, 1.35), 2)


def add_random_product(rng: random.Random, state: State, name: str, count: int) -> str:
    """Add product type `name` with `count` random variants (most available)."""
    combos = rng.sample(option_combinations(name), count)
    variants = [
        (combo, variant_price(rng, name), rng.random() < 0.8) for combo in combos
    ]
    return add_product(state, rng, name, variants)


def add_user(
    state: State,
    rng: random.Random,
    sources: list[str],
    name: tuple[str, str] | None = None,
) -> str:
    """Add a user with payment methods of the given sources, in order; their id."""
    first, last = name or (rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES))
    user_id = fresh_id(rng, state, f"{first.lower()}_{last.lower()}_", 4)
    number = user_id.rsplit("_", 1)[1]
    user: dict[str, Any] = {
        "user_id": user_id,
        "name": {"first_name": first, "last_name": last},
        "address": random_address(rng),
        "email": f"{first.lower()}.{last.lower()}{number}@example.com",
        "payment_methods": {},
        "orders": [],
    }
    state["users"][user_id] = user
    for source in sources:
        add_payment_method(state, rng, user_id, source)
    return user_id


def add_payment_method(
    state: State, rng: random.Random, user_id: str, source: str
) -> str:
    """Add a credit_card, paypal or gift_card method to a user; its id."""
    method_id = fresh_id(rng, state, f"{source}_", 7)
    method: dict[str, Any] = {"source": source, "id": method_id}
    if source == "credit_card":
        method["brand"] = rng.choice(CARD_BRANDS)
        method["last_four"] = f"{rng.randint(0, 9999):04d}"
    elif source == "gift_card":
        method["balance"] = float(rng.randint(5, 400))
    state["users"][user_id]["payment_methods"][method_id] = method
    return method_id


def add_order(
    state: State,
    rng: random.Random,
    user_id: str,
    item_ids: list[str],
    status: str,
    payment_method_id: str,
) -> str:
    """Add an order of the given variants (item ids), paid by one method; its id."""
    variants = {
        item_id: (product, product["variants"][item_id])
        for product in state["products"].values()
        for item_id in product["variants"]
    }
    order_id = fresh_id(rng, state, "#W", 7)
    items = [
        {
            "name": variants[item_id][0]["name"],
            "product_id": variants[item_id][0]["product_id"],
            "item_id": item_id,
            "price": variants[item_id][1]["price"],
            "options": dict(variants[item_id][1]["options"]),
        }
        for item_id in item_ids
    ]
    fulfillments = []
    if status in ("processed", "delivered"):
        tracking = "".join(rng.choice("0123456789") for _ in range(12))
        fulfillments.append({"tracking_id": [tracking], "item_ids": list(item_ids)})
    total = round(sum(item["price"] for item in items), 2)
    state["orders"][order_id] = {
        "order_id": order_id,
        "user_id": user_id,
        "address": dict(state["users"][user_id]["address"]),
        "items": items,
        "status": status,
        "fulfillments": fulfillments,
        "payment_history": [
            {
                "transaction_type": "payment",
                "amount": total,
                "payment_method_id": payment_method_id,
            }
        ],
        **dict.fromkeys(ORDER_REQUEST_FIELDS),
    }
    state["users"][user_id]["orders"].append(order_id)
    return order_id


def add_catalog(
    state: State, rng: random.Random, names: list[str], count: int
) -> dict[str, str]:
    """Add the named product types with `count` random variants each; name -> id."""
    return {name: add_random_product(rng, state, name, count) for name in names}


def add_bystanders(state: State, rng: random.Random, count: int) -> list[str]:
    """Add `count` other customers, each with one order from the catalog; their ids."""
    user_ids = []
    for _ in range(count):
        user_id = add_user(
            state, rng, [rng.choice(["credit_card", "paypal", "gift_card"])]
        )
        method_id = next(iter(state["users"][user_id]["payment_methods"]))
        product = state["products"][rng.choice(sorted(state["products"]))]
        item_id = rng.choice(sorted(product["variants"]))
        status = rng.choice(["pending", "processed", "delivered", "cancelled"])
        add_order(state, rng, user_id, [item_id], status, method_id)
        user_ids.append(user_id)
    return user_ids


def order_total(order: Mapping[str, Any]) -> float:
    """What the order's payment history says was paid, net of refunds."""
    total = 0.0
    for entry in order["payment_history"]:
        sign = 1 if entry["transaction_type"] == "payment" else -1
        total += sign * entry["amount"]
    return round(total, 2)


def describe_method(method: Mapping[str, Any]) -> str:
    """How a customer names a payment method in a message."""
    if method["source"] == "credit_card":
        return f"{method['brand']} credit card ending in {method['last_four']}"
    if method["source"] == "paypal":
        return "PayPal account"
    return "gift card"


def describe_address(address: Mapping[str, str]) -> str:
    """An address as one line of text."""
    lines = [address["address1"], address["address2"], address["city"]]
    region = f"{address['state']} {address['zip']}"
    return ", ".join([line for line in lines if line] + [region, address["country"]])
