"""ToolSandbox's web-backed search tools on the phone kit, over seeded synthetic data.

Named and typed as `tool_sandbox/tools/rapid_api_search_tools.py`
(apple/ToolSandbox), where they call RapidAPI services; here every answer is a
pure function of the device (its id, location and clock), drawn from a
generator seeded by them, so an episode replays exactly and the state carries
no extra tables. As in ToolSandbox, each needs wifi ("ConnectionError: Wifi is
not enabled"), and a search around the current location needs location service.
"""

from __future__ import annotations

import datetime
import random
from typing import Any

from ...schema import ToolError
from ...toolkit import State
from .utilities import check_latitude, check_longitude, geodesic_km

PLACE_KINDS = {
    "restaurant": ("Trattoria", "Bistro", "Grill", "Noodle House", "Taqueria", "Diner"),
    "cafe": ("Coffee", "Espresso Bar", "Tea Room"),
    "pharmacy": ("Pharmacy", "Drugstore"),
    "supermarket": ("Market", "Grocery"),
    "gas station": ("Fuel", "Gas"),
    "park": ("Park", "Gardens"),
    "museum": ("Museum", "Gallery"),
    "hotel": ("Hotel", "Inn"),
}
PLACE_NAMES = ("Blue Door", "Maple", "Harbor", "Golden Gate", "Riverside", "Oak Street",
               "Sunrise", "Corner", "Lighthouse", "Union", "Cedar", "Old Town")  # fmt: skip
STREETS = (
    "Main St",
    "Oak Ave",
    "Pine Rd",
    "Market St",
    "Elm St",
    "Lake Dr",
    "Hill Blvd",
)
CITIES = ("Springfield", "Riverton", "Fairview", "Lakeside", "Greenville", "Madison")
CONDITIONS = (
    "Sunny",
    "Partly cloudy",
    "Cloudy",
    "Light rain",
    "Heavy rain",
    "Snow",
    "Fog",
)
STOCKS = (
    ("Apple Inc", "AAPL", "NASDAQ", 190.0), ("Microsoft Corp", "MSFT", "NASDAQ", 410.0),
    ("Alphabet Inc Class A", "GOOGL", "NASDAQ", 170.0), ("Amazon.com Inc", "AMZN", "NASDAQ", 185.0),
    ("NVIDIA Corp", "NVDA", "NASDAQ", 120.0), ("Tesla Inc", "TSLA", "NASDAQ", 240.0),
    ("Coca-Cola Co", "KO", "NYSE", 62.0), ("Walmart Inc", "WMT", "NYSE", 68.0),
    ("JPMorgan Chase & Co", "JPM", "NYSE", 205.0), ("Toyota Motor Corp", "TM", "NYSE", 180.0),
)  # fmt: skip
# Units of each currency per US dollar (2024 levels); the day's rate varies by +-2%.
USD_RATES = {
    "USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.0, "CNY": 7.24, "CAD": 1.36,
    "AUD": 1.52, "CHF": 0.90, "INR": 83.4, "MXN": 17.1, "BRL": 5.05, "KRW": 1350.0,
    "SEK": 10.6, "NOK": 10.7, "SGD": 1.35, "HKD": 7.82, "NZD": 1.66, "ZAR": 18.7,
}  # fmt: skip


def _require_wifi(state: State) -> None:
    if not state["settings"]["wifi"]:
        raise ToolError("ConnectionError: Wifi is not enabled")


def _rng(state: State, *keys: object) -> random.Random:
    """A generator seeded by the device id and `keys`: the same question, the same answer."""
    return random.Random("/".join(map(str, (state["settings"]["device_id"], *keys))))


def _day(state: State, offset: int = 0) -> str:
    clock = state["clock"]["current_timestamp"]
    day = datetime.datetime.fromtimestamp(clock, tz=datetime.timezone.utc).date()
    return (day + datetime.timedelta(days=offset)).isoformat()


def _where(
    state: State, latitude: float | None, longitude: float | None
) -> tuple[float, float]:
    """The given coordinates, or the device's when neither is given (ToolSandbox's rule)."""
    check_latitude(latitude)
    check_longitude(longitude)
    if (latitude is None) != (longitude is None):
        raise ToolError(
            "ValueError: Latitude and Longitude must be either both provided, or both not provided"
        )
    if latitude is None or longitude is None:
        if not state["settings"]["location_service"]:
            raise ToolError("PermissionError: Location service is not enabled.")
        return state["settings"]["latitude"], state["settings"]["longitude"]
    return latitude, longitude


def _address(rng: random.Random) -> str:
    return f"{rng.randint(1, 2999)} {rng.choice(STREETS)}, {rng.choice(CITIES)}"


def places_around(
    state: State, latitude: float, longitude: float
) -> list[dict[str, Any]]:
    """The synthetic places within about 5 km of a point (on a 0.01-degree grid)."""
    rng = _rng(state, "places", round(latitude, 2), round(longitude, 2))
    places = []
    for index in range(16):
        kind = rng.choice(sorted(PLACE_KINDS))
        lat = max(-90.0, min(90.0, latitude + rng.uniform(-0.04, 0.04)))
        lon = max(-180.0, min(180.0, longitude + rng.uniform(-0.04, 0.04)))
        places.append(
            {
                "name": f"{rng.choice(PLACE_NAMES)} {rng.choice(PLACE_KINDS[kind])}",
                "full_address": _address(rng),
                "type": kind,
                "phone_number": f"+1{rng.randint(200, 989)}{rng.randint(0, 9999999):07d}",
                "rating": round(rng.uniform(3.0, 5.0), 1),
                "price_level": rng.choice(("$", "$$", "$$$")),
                "working_hours": f"{rng.randint(6, 10):02d}:00-{rng.randint(17, 23):02d}:00",
                "latitude": round(lat, 6),
                "longitude": round(lon, 6),
                "place_index": index,
            }
        )
    return places


def search_lat_lon(state: State, latitude: float, longitude: float) -> Any:
    """The street address at a latitude and longitude."""
    _require_wifi(state)
    latitude, longitude = _where(state, latitude, longitude)
    return _address(_rng(state, "address", round(latitude, 4), round(longitude, 4)))


def search_location_around_lat_lon(
    state: State,
    location: str,
    latitude: float | None = None,
    longitude: float | None = None,
) -> list[dict[str, Any]]:
    """Up to 4 places matching `location` (words of a name or a type), nearest first."""
    _require_wifi(state)
    latitude, longitude = _where(state, latitude, longitude)
    words = location.lower().replace("'", "").split()
    found = [
        place
        for place in places_around(state, latitude, longitude)
        if words and all(w in f"{place['name']} {place['type']}".lower() for w in words)
    ]
    found.sort(
        key=lambda p: geodesic_km(latitude, longitude, p["latitude"], p["longitude"])
    )
    return [{k: v for k, v in p.items() if k != "place_index"} for p in found[:4]]


def search_weather_around_lat_lon(
    state: State,
    days: int = 0,
    latitude: float | None = None,
    longitude: float | None = None,
) -> Any:
    """The forecast `days` days from today (0: today, with current conditions), Celsius and km."""
    _require_wifi(state)
    latitude, longitude = _where(state, latitude, longitude)
    if days < 0:
        raise ToolError(
            f"ValueError: Days must be positive integer, found days={days}."
        )
    if days > 13:
        return None  # the forecast service covers two weeks
    rng = _rng(
        state, "weather", round(latitude, 1), round(longitude, 1), _day(state, days)
    )
    base = 28 - abs(latitude) * 0.45 + rng.uniform(-6, 6)
    low, high = round(base - rng.uniform(3, 8), 1), round(base + rng.uniform(2, 7), 1)
    forecast: dict[str, Any] = {
        "date": _day(state, days),
        "condition": rng.choice(CONDITIONS),
        "max_temperature": high,
        "min_temperature": low,
        "average_temperature": round((low + high) / 2, 1),
        "max_wind_speed": round(rng.uniform(5, 45), 1),
        "average_visibility_distance": round(rng.uniform(2, 10), 1),
        "average_humidity": rng.randint(25, 95),
        "daily_chance_of_rain": rng.randint(0, 100),
        "sunrise": f"{rng.randint(5, 7):02d}:{rng.randint(0, 59):02d} AM",
        "sunset": f"{rng.randint(5, 8):02d}:{rng.randint(0, 59):02d} PM",
        "lat": round(latitude, 2),
        "lon": round(longitude, 2),
        "temperature_unit": "Celsius",
        "distance_unit": "Kilometer",
    }
    if days == 0:
        forecast.update(
            current_temperature=round(rng.uniform(low, high), 1),
            perceived_temperature=round(rng.uniform(low - 2, high + 2), 1),
            wind_speed=round(rng.uniform(0, 40), 1),
            visibility_distance=round(rng.uniform(1, 10), 1),
            barometric_pressure=round(rng.uniform(990, 1030), 1),
        )
    return forecast


def search_stock(state: State, query: str) -> Any:
    """A stock's name, symbol, exchange, price and change today, by name, symbol or exchange."""
    _require_wifi(state)
    wanted = query.strip().lower()
    for name, symbol, exchange, level in STOCKS:
        if wanted and (
            wanted == symbol.lower()
            or wanted in name.lower()
            or wanted == exchange.lower()
        ):
            rng = _rng(state, "stock", symbol, _day(state))
            previous = round(level * rng.uniform(0.8, 1.2), 2)
            price = round(previous * rng.uniform(0.96, 1.04), 2)
            return {
                "name": name,
                "symbol": symbol,
                "exchange": exchange,
                "price": price,
                "change": round(price - previous, 2),
                "percent_change": round((price - previous) / previous * 100, 2),
                "currency": "USD",
            }
    return None


def usd_rate(state: State, code: str) -> float:
    """Units of `code` per US dollar today."""
    if code == "USD":
        return 1.0
    return USD_RATES[code] * _rng(state, "rate", code, _day(state)).uniform(0.98, 1.02)


def _check_currency(code: str) -> str:
    if code.upper() not in USD_RATES:
        raise ToolError(
            f"ValueError: '{code}' is not an ISO 4217 currency code this service converts "
            f"({', '.join(sorted(USD_RATES))})"
        )
    return code.upper()


def convert_currency(
    state: State, amount: float, from_currency_code: str, to_currency_code: str
) -> float:
    """`amount` in one currency converted to another at today's rate (ISO 4217 codes)."""
    source, target = (
        _check_currency(from_currency_code),
        _check_currency(to_currency_code),
    )
    _require_wifi(state)
    return round(amount / usd_rate(state, source) * usd_rate(state, target), 2)
