"""ToolSandbox's utility tools on the phone kit: time of day, units, distance, holidays.

Named and typed as `tool_sandbox/tools/utilities.py` (apple/ToolSandbox), with
the kit's conventions: every time is UTC, and every library ToolSandbox calls
is replaced by a few lines of stdlib code so a package stays dependency-free:
- `unit_conversion`: a table of common units instead of pint (unknown units are
  an `UndefinedUnitError`, like pint's);
- `calculate_lat_lon_distance`: Vincenty's formulae on WGS-84, geopy's default
  ellipsoid (they agree to millimetres except for nearly antipodal points,
  where this falls back to the great circle);
- `search_holiday`: the US federal holidays by their legal rules instead of the
  `holidays` package (observed-on-weekday dates are not listed), matched by
  case-insensitive word containment instead of a fuzzy score above 90; the
  year defaults to the device clock's, and the holiday is at 00:00 UTC.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from ...schema import ToolError
from ...toolkit import State

# Every unit: (dimension, factor to the dimension's base unit). Temperatures are affine.
UNITS: dict[str, tuple[str, float]] = {
    "meter": ("length", 1.0), "kilometer": ("length", 1000.0),
    "centimeter": ("length", 0.01), "millimeter": ("length", 0.001),
    "mile": ("length", 1609.344), "yard": ("length", 0.9144), "foot": ("length", 0.3048),
    "inch": ("length", 0.0254), "nautical_mile": ("length", 1852.0),
    "gram": ("mass", 1.0), "kilogram": ("mass", 1000.0), "milligram": ("mass", 0.001),
    "pound": ("mass", 453.59237), "ounce": ("mass", 28.349523125),
    "tonne": ("mass", 1e6), "stone": ("mass", 6350.29318),
    "liter": ("volume", 1.0), "milliliter": ("volume", 0.001),
    "gallon": ("volume", 3.785411784), "quart": ("volume", 0.946352946),
    "pint": ("volume", 0.473176473), "cup": ("volume", 0.2365882365),
    "second": ("time", 1.0), "minute": ("time", 60.0), "hour": ("time", 3600.0),
    "day": ("time", 86400.0), "week": ("time", 604800.0),
    "kilometer_per_hour": ("speed", 1 / 3.6), "mile_per_hour": ("speed", 0.44704),
    "meter_per_second": ("speed", 1.0), "knot": ("speed", 1852 / 3600),
    "celsius": ("temperature", 1.0), "fahrenheit": ("temperature", 1.0),
    "kelvin": ("temperature", 1.0),
}  # fmt: skip
ALIASES = {
    "m": "meter", "km": "kilometer", "cm": "centimeter", "mm": "millimeter",
    "mi": "mile", "yd": "yard", "ft": "foot", "feet": "foot", "in": "inch",
    "g": "gram", "kg": "kilogram", "mg": "milligram", "lb": "pound", "lbs": "pound",
    "oz": "ounce", "ton": "tonne", "l": "liter", "litre": "liter", "ml": "milliliter",
    "millilitre": "milliliter", "gal": "gallon", "s": "second", "sec": "second",
    "min": "minute", "h": "hour", "hr": "hour", "kph": "kilometer_per_hour",
    "km/h": "kilometer_per_hour", "mph": "mile_per_hour", "m/s": "meter_per_second",
    "degc": "celsius", "degf": "fahrenheit", "k": "kelvin", "metre": "meter",
    "kilometre": "kilometer", "centimetre": "centimeter", "millimetre": "millimeter",
}  # fmt: skip


def seconds_to_hours_minutes_seconds(state: State, seconds: float) -> dict[str, int]:
    """The time of day `seconds` past 0:00 (UTC) as hour, minute and second."""
    try:
        moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError) as exc:
        raise ToolError(f"ValueError: {exc}") from None
    return {"hour": moment.hour, "minute": moment.minute, "second": moment.second}


def _unit(name: str) -> str:
    """A unit's canonical name: exact, lower-cased, singular, or an abbreviation."""
    key = (
        name.strip()
        .lower()
        .replace(" ", "_")
        .replace("degree_", "")
        .replace("degrees_", "")
    )
    for candidate in (
        key,
        key.removesuffix("s"),
        key.removesuffix("es"),
        ALIASES.get(key),
    ):
        if candidate in UNITS:
            return candidate
    raise ToolError(f"UndefinedUnitError: '{name}' is not defined in the unit registry")


def _to_kelvin(amount: float, unit: str) -> float:
    return {
        "celsius": amount + 273.15,
        "fahrenheit": (amount - 32) * 5 / 9 + 273.15,
        "kelvin": amount,
    }[unit]


def _from_kelvin(kelvin: float, unit: str) -> float:
    return {
        "celsius": kelvin - 273.15,
        "fahrenheit": (kelvin - 273.15) * 9 / 5 + 32,
        "kelvin": kelvin,
    }[unit]


def unit_conversion(state: State, amount: float, from_unit: str, to_unit: str) -> float:
    """`amount` in `from_unit` expressed in `to_unit` (common English unit names)."""
    source, target = _unit(from_unit), _unit(to_unit)
    (dimension, factor), (wanted, divisor) = UNITS[source], UNITS[target]
    if dimension != wanted:
        raise ToolError(
            f"DimensionalityError: cannot convert from '{from_unit}' ({dimension}) "
            f"to '{to_unit}' ({wanted})"
        )
    if dimension == "temperature":
        return _from_kelvin(_to_kelvin(amount, source), target)
    return amount * factor / divisor


def check_latitude(value: float | None, name: str = "latitude") -> None:
    """A latitude in [-90, 90] (None, an omitted optional one, passes)."""
    if value is not None and not -90 <= value <= 90:
        raise ToolError(f"ValueError: {name} {value} is outside [-90, 90]")


def check_longitude(value: float | None, name: str = "longitude") -> None:
    """A longitude in [-180, 180] (None, an omitted optional one, passes)."""
    if value is not None and not -180 <= value <= 180:
        raise ToolError(f"ValueError: {name} {value} is outside [-180, 180]")


def _great_circle_km(lat0: float, lon0: float, lat1: float, lon1: float) -> float:
    phi0, phi1 = math.radians(lat0), math.radians(lat1)
    half = (
        math.sin((phi1 - phi0) / 2) ** 2
        + math.cos(phi0) * math.cos(phi1) * math.sin(math.radians(lon1 - lon0) / 2) ** 2
    )
    return 2 * 6371.0088 * math.asin(min(1.0, math.sqrt(half)))


def geodesic_km(lat0: float, lon0: float, lat1: float, lon1: float) -> float:
    """Distance on the WGS-84 ellipsoid in km (Vincenty's inverse formula)."""
    a, f = 6378137.0, 1 / 298.257223563
    b = (1 - f) * a
    u1 = math.atan((1 - f) * math.tan(math.radians(lat0)))
    u2 = math.atan((1 - f) * math.tan(math.radians(lat1)))
    spread = math.radians(lon1 - lon0)
    lam = spread
    for _ in range(200):
        sin_lam, cos_lam = math.sin(lam), math.cos(lam)
        sin_sigma = math.hypot(
            math.cos(u2) * sin_lam,
            math.cos(u1) * math.sin(u2) - math.sin(u1) * math.cos(u2) * cos_lam,
        )
        if sin_sigma == 0:
            return 0.0  # the same point
        cos_sigma = math.sin(u1) * math.sin(u2) + math.cos(u1) * math.cos(u2) * cos_lam
        sigma = math.atan2(sin_sigma, cos_sigma)
        sin_alpha = math.cos(u1) * math.cos(u2) * sin_lam / sin_sigma
        cos2_alpha = 1 - sin_alpha**2
        cos_2sm = (
            cos_sigma - 2 * math.sin(u1) * math.sin(u2) / cos2_alpha
            if cos2_alpha
            else 0.0
        )
        c = f / 16 * cos2_alpha * (4 + f * (4 - 3 * cos2_alpha))
        previous = lam
        lam = spread + (1 - c) * f * sin_alpha * (
            sigma + c * sin_sigma * (cos_2sm + c * cos_sigma * (-1 + 2 * cos_2sm**2))
        )
        if abs(lam - previous) < 1e-12:
            break
    else:  # nearly antipodal: the iteration does not converge
        return _great_circle_km(lat0, lon0, lat1, lon1)
    u_sq = cos2_alpha * (a * a - b * b) / (b * b)
    big_a = 1 + u_sq / 16384 * (4096 + u_sq * (-768 + u_sq * (320 - 175 * u_sq)))
    big_b = u_sq / 1024 * (256 + u_sq * (-128 + u_sq * (74 - 47 * u_sq)))
    delta = big_b * sin_sigma * (
        cos_2sm
        + big_b / 4 * (
            cos_sigma * (-1 + 2 * cos_2sm**2)
            - big_b / 6 * cos_2sm * (-3 + 4 * sin_sigma**2) * (-3 + 4 * cos_2sm**2)
        )
    )  # fmt: skip
    return b * big_a * (sigma - delta) / 1000


def calculate_lat_lon_distance(
    state: State,
    latitude_0: float,
    longitude_0: float,
    latitude_1: float,
    longitude_1: float,
) -> float:
    """The distance in km between two latitude/longitude pairs."""
    check_latitude(latitude_0, "latitude_0")
    check_latitude(latitude_1, "latitude_1")
    check_longitude(longitude_0, "longitude_0")
    check_longitude(longitude_1, "longitude_1")
    return geodesic_km(latitude_0, longitude_0, latitude_1, longitude_1)


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> datetime.date:
    """The n-th `weekday` (Monday = 0) of a month; n = -1 is the last."""
    if n > 0:
        first = datetime.date(year, month, 1)
        return first + datetime.timedelta(
            days=(weekday - first.weekday()) % 7 + 7 * (n - 1)
        )
    following = datetime.date(year + month // 12, month % 12 + 1, 1)
    last = following - datetime.timedelta(days=1)
    return last - datetime.timedelta(days=(last.weekday() - weekday) % 7)


def us_holidays(year: int) -> dict[str, datetime.date]:
    """The US federal holidays of `year` by their legal rules (5 U.S.C. 6103)."""
    holidays = {
        "New Year's Day": datetime.date(year, 1, 1),
        "Martin Luther King Jr. Day": _nth_weekday(year, 1, 0, 3),
        "Washington's Birthday": _nth_weekday(year, 2, 0, 3),
        "Memorial Day": _nth_weekday(year, 5, 0, -1),
        "Independence Day": datetime.date(year, 7, 4),
        "Labor Day": _nth_weekday(year, 9, 0, 1),
        "Columbus Day": _nth_weekday(year, 10, 0, 2),
        "Veterans Day": datetime.date(year, 11, 11),
        "Thanksgiving": _nth_weekday(year, 11, 3, 4),
        "Christmas Day": datetime.date(year, 12, 25),
    }
    if year >= 2021:
        holidays["Juneteenth National Independence Day"] = datetime.date(year, 6, 19)
    return holidays


def _words(text: str) -> list[str]:
    return "".join(
        c if c.isalnum() else " " for c in text.lower().replace("'", "")
    ).split()


def find_holiday(name: str, year: int) -> datetime.date | None:
    """The holiday of `year` whose name holds every word of `name` (or the reverse)."""
    wanted = _words(name)
    if not wanted:
        return None
    for holiday, date in us_holidays(year).items():
        words = _words(holiday)
        if all(w in words for w in wanted) or all(w in wanted for w in words):
            return date
    return None


def search_holiday(state: State, holiday_name: str, year: int | None = None) -> Any:
    """POSIX time (00:00 UTC) of a US holiday in `year` (default: the device's year), or None."""
    if not state["settings"]["wifi"]:
        raise ToolError("ConnectionError: Wifi is not enabled")
    if year is None:
        clock = state["clock"]["current_timestamp"]
        year = datetime.datetime.fromtimestamp(clock, tz=datetime.timezone.utc).year
    if not 1 <= year <= 9998:
        raise ToolError(f"ValueError: year {year} is out of range")
    date = find_holiday(holiday_name, year)
    if date is None:
        return None
    return datetime.datetime(
        date.year, date.month, date.day, tzinfo=datetime.timezone.utc
    ).timestamp()
