"""Tool implementations of the Phone (ToolSandbox) kit, named and typed as ToolSandbox (apple/ToolSandbox).

Every tool checks its preconditions before it touches the state, so a call
that fails with `ToolError` never changes it.
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Callable
from typing import Any

from ...schema import ToolError
from ...toolkit import State
from . import utilities, web_search

# State: "settings" (device switches and coordinates), "contacts", "messages" and
# "reminders" keyed by id (ToolSandbox's CONTACT, MESSAGING and REMINDER tables),
# and "clock" with the device's current POSIX time.

MIN_TIMESTAMP = 315529200.0
MAX_TIMESTAMP = 2524604400.0
PHONE_NUMBER = re.compile(r"^\+[1-9][0-9]{6,14}$")
SERVICES = {
    "cellular": "Cellular service",
    "wifi": "Wifi",
    "location_service": "Location service",
}


def _new_id(state: State, table: str, seed: str) -> str:
    """A deterministic uuid for a new row: depends on the table's rows and `seed`."""
    count = len(state[table])
    while True:
        new = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{table}/{count}/{seed}"))
        if new not in state[table]:
            return new
        count += 1


def _check_phone_number(phone_number: str) -> None:
    if not PHONE_NUMBER.match(phone_number):
        raise ToolError(
            f"NumberParseException: '{phone_number}' is not a phone number in "
            "international format such as '+12453344098'"
        )


def _check_timestamp(timestamp: float, name: str) -> None:
    if not MIN_TIMESTAMP <= timestamp <= MAX_TIMESTAMP:
        raise ToolError(
            f"ValueError: {name} {timestamp} is outside [{MIN_TIMESTAMP}, {MAX_TIMESTAMP}]"
        )


def _utc(timestamp: float) -> datetime.datetime:
    _check_timestamp(timestamp, "timestamp")
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)


def _matches(
    row: dict[str, Any], criteria: dict[str, Any], text_fields: set[str]
) -> bool:
    """Exact match on ids and values, word match on text fields, bounds on times."""
    for field, wanted in criteria.items():
        if field.endswith("_lowerbound"):
            if row[field.removesuffix("_lowerbound")] < wanted:
                return False
        elif field.endswith("_upperbound"):
            if row[field.removesuffix("_upperbound")] > wanted:
                return False
        elif field in text_fields:
            words = str(row[field] or "").lower().split()
            if not all(word in words for word in wanted.lower().split()):
                return False
        elif row[field] != wanted:
            return False
    return True


def _search(
    state: State, table: str, criteria: dict[str, Any], text_fields: set[str]
) -> list[dict[str, Any]]:
    given = {key: value for key, value in criteria.items() if value is not None}
    if not given:
        raise ToolError("ValueError: no search criteria are given; give at least one")
    return [
        dict(row) for row in state[table].values() if _matches(row, given, text_fields)
    ]


def _set_service(state: State, service: str, on: bool) -> None:
    label = SERVICES[service]
    settings = state["settings"]
    if on and settings["low_battery_mode"]:
        raise ToolError(
            f"PermissionError: {label} cannot be turned on in low battery mode"
        )
    if settings[service] == on:
        raise ToolError(
            f"ValueError: {label} already {'enabled' if on else 'disabled'}"
        )
    settings[service] = on


def set_low_battery_mode_status(state: State, on: bool) -> None:
    settings = state["settings"]
    if settings["low_battery_mode"] == on:
        raise ToolError(f"ValueError: low battery mode already {'on' if on else 'off'}")
    settings["low_battery_mode"] = on
    if on:
        for service in SERVICES:
            settings[service] = False


def get_low_battery_mode_status(state: State) -> bool:
    return bool(state["settings"]["low_battery_mode"])


def set_location_service_status(state: State, on: bool) -> None:
    _set_service(state, "location_service", on)


def get_location_service_status(state: State) -> bool:
    return bool(state["settings"]["location_service"])


def set_cellular_service_status(state: State, on: bool) -> None:
    _set_service(state, "cellular", on)


def get_cellular_service_status(state: State) -> bool:
    return bool(state["settings"]["cellular"])


def set_wifi_status(state: State, on: bool) -> None:
    _set_service(state, "wifi", on)


def get_wifi_status(state: State) -> bool:
    return bool(state["settings"]["wifi"])


def get_current_location(state: State) -> dict[str, float]:
    settings = state["settings"]
    if not settings["location_service"]:
        raise ToolError("PermissionError: Location service is not enabled.")
    return {"latitude": settings["latitude"], "longitude": settings["longitude"]}


def add_contact(
    state: State,
    name: str,
    phone_number: str,
    relationship: str | None = None,
    is_self: bool = False,
) -> str:
    _check_phone_number(phone_number)
    if is_self and any(row["is_self"] for row in state["contacts"].values()):
        raise ToolError("DuplicateError: Self entry already exists.")
    person_id = _new_id(state, "contacts", name)
    state["contacts"][person_id] = {
        "person_id": person_id,
        "name": name,
        "phone_number": phone_number,
        "relationship": relationship,
        "is_self": is_self,
    }
    return person_id


def modify_contact(
    state: State,
    person_id: str,
    name: str | None = None,
    phone_number: str | None = None,
    relationship: str | None = None,
    is_self: bool | None = None,
) -> None:
    changes = {
        "name": name,
        "phone_number": phone_number,
        "relationship": relationship,
        "is_self": is_self,
    }
    changes = {key: value for key, value in changes.items() if value is not None}
    if not changes:
        raise ToolError("ValueError: give at least one field to modify")
    if person_id not in state["contacts"]:
        raise ToolError(f"NoDataError: no contact with person_id '{person_id}'")
    if phone_number is not None:
        _check_phone_number(phone_number)
    if is_self and any(
        row["is_self"] for key, row in state["contacts"].items() if key != person_id
    ):
        raise ToolError("DuplicateError: another contact is already the user")
    state["contacts"][person_id].update(changes)


def remove_contact(state: State, person_id: str) -> None:
    if person_id not in state["contacts"]:
        raise ToolError(f"NoDataError: no contact with person_id '{person_id}'")
    del state["contacts"][person_id]


def search_contacts(
    state: State,
    person_id: str | None = None,
    name: str | None = None,
    phone_number: str | None = None,
    relationship: str | None = None,
    is_self: bool | None = None,
) -> list[dict[str, Any]]:
    criteria = {
        "person_id": person_id,
        "name": name,
        "phone_number": phone_number,
        "relationship": relationship,
        "is_self": is_self,
    }
    return _search(state, "contacts", criteria, {"name", "relationship"})


def send_message_with_phone_number(
    state: State, phone_number: str, content: str
) -> str:
    _check_phone_number(phone_number)
    if not state["settings"]["cellular"]:
        raise ToolError("ConnectionError: Cellular service is not enabled")
    selves = [row for row in state["contacts"].values() if row["is_self"]]
    if len(selves) != 1:
        raise ToolError("DuplicateError: exactly one contact must be the user")
    recipient = next(
        (
            row
            for row in state["contacts"].values()
            if row["phone_number"] == phone_number
        ),
        None,
    )
    message_id = _new_id(state, "messages", phone_number + content)
    state["messages"][message_id] = {
        "message_id": message_id,
        "sender_person_id": selves[0]["person_id"],
        "sender_phone_number": selves[0]["phone_number"],
        "recipient_person_id": recipient["person_id"] if recipient else None,
        "recipient_phone_number": phone_number,
        "content": content,
        "creation_timestamp": state["clock"]["current_timestamp"],
    }
    return message_id


def search_messages(
    state: State,
    message_id: str | None = None,
    sender_person_id: str | None = None,
    sender_phone_number: str | None = None,
    recipient_person_id: str | None = None,
    recipient_phone_number: str | None = None,
    content: str | None = None,
    creation_timestamp_lowerbound: float | None = None,
    creation_timestamp_upperbound: float | None = None,
) -> list[dict[str, Any]]:
    criteria = {
        "message_id": message_id,
        "sender_person_id": sender_person_id,
        "sender_phone_number": sender_phone_number,
        "recipient_person_id": recipient_person_id,
        "recipient_phone_number": recipient_phone_number,
        "content": content,
        "creation_timestamp_lowerbound": creation_timestamp_lowerbound,
        "creation_timestamp_upperbound": creation_timestamp_upperbound,
    }
    return _search(state, "messages", criteria, {"content"})


def add_reminder(
    state: State,
    content: str,
    reminder_timestamp: float,
    latitude: float | None = None,
    longitude: float | None = None,
) -> str:
    _check_timestamp(reminder_timestamp, "reminder_timestamp")
    utilities.check_latitude(latitude)
    utilities.check_longitude(longitude)
    reminder_id = _new_id(state, "reminders", f"{content}/{reminder_timestamp}")
    state["reminders"][reminder_id] = {
        "reminder_id": reminder_id,
        "content": content,
        "creation_timestamp": state["clock"]["current_timestamp"],
        "reminder_timestamp": reminder_timestamp,
        "latitude": latitude,
        "longitude": longitude,
    }
    return reminder_id


def modify_reminder(
    state: State,
    reminder_id: str,
    content: str | None = None,
    reminder_timestamp: float | None = None,
    latitude: float | None = None,
    longitude: float | None = None,
) -> None:
    changes = {
        "content": content,
        "reminder_timestamp": reminder_timestamp,
        "latitude": latitude,
        "longitude": longitude,
    }
    changes = {key: value for key, value in changes.items() if value is not None}
    if not changes:
        raise ToolError("ValueError: give at least one field to modify")
    if reminder_id not in state["reminders"]:
        raise ToolError(f"NoDataError: no reminder with reminder_id '{reminder_id}'")
    if reminder_timestamp is not None:
        _check_timestamp(reminder_timestamp, "reminder_timestamp")
    utilities.check_latitude(latitude)
    utilities.check_longitude(longitude)
    changes["creation_timestamp"] = state["clock"]["current_timestamp"]
    state["reminders"][reminder_id].update(changes)


def search_reminder(
    state: State,
    reminder_id: str | None = None,
    content: str | None = None,
    creation_timestamp_lowerbound: float | None = None,
    creation_timestamp_upperbound: float | None = None,
    reminder_timestamp_lowerbound: float | None = None,
    reminder_timestamp_upperbound: float | None = None,
    latitude: float | None = None,
    longitude: float | None = None,
) -> list[dict[str, Any]]:
    criteria = {
        "reminder_id": reminder_id,
        "content": content,
        "creation_timestamp_lowerbound": creation_timestamp_lowerbound,
        "creation_timestamp_upperbound": creation_timestamp_upperbound,
        "reminder_timestamp_lowerbound": reminder_timestamp_lowerbound,
        "reminder_timestamp_upperbound": reminder_timestamp_upperbound,
        "latitude": latitude,
        "longitude": longitude,
    }
    return _search(state, "reminders", criteria, {"content"})


def remove_reminder(state: State, reminder_id: str) -> None:
    if reminder_id not in state["reminders"]:
        raise ToolError(f"NoDataError: no reminder with reminder_id '{reminder_id}'")
    del state["reminders"][reminder_id]


def get_current_timestamp(state: State) -> float:
    return float(state["clock"]["current_timestamp"])


def timestamp_to_datetime_info(state: State, timestamp: float) -> dict[str, int]:
    moment = _utc(timestamp)
    return {
        "year": moment.year,
        "month": moment.month,
        "day": moment.day,
        "hour": moment.hour,
        "minute": moment.minute,
        "second": moment.second,
        "isoweekday": moment.isoweekday(),
    }


def datetime_info_to_timestamp(
    state: State, year: int, month: int, day: int, hour: int, minute: int, second: int
) -> float:
    try:
        moment = datetime.datetime(
            year, month, day, hour, minute, second, tzinfo=datetime.timezone.utc
        )
    except (ValueError, OverflowError) as exc:
        raise ToolError(f"ValueError: {exc}") from None
    return moment.timestamp()


def shift_timestamp(
    state: State,
    timestamp: float,
    weeks: int = 0,
    days: int = 0,
    hours: int = 0,
    minutes: int = 0,
    seconds: int = 0,
) -> float:
    try:
        shift = datetime.timedelta(
            weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds
        )
        shifted = (_utc(timestamp) + shift).timestamp()
    except OverflowError as exc:
        raise ToolError(f"OverflowError: {exc}") from None
    _check_timestamp(shifted, "shifted timestamp")
    return shifted


def timestamp_diff(
    state: State, timestamp_0: float, timestamp_1: float
) -> dict[str, int]:
    delta = _utc(timestamp_1) - _utc(timestamp_0)
    return {"days": delta.days, "seconds": delta.seconds}


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "set_low_battery_mode_status": set_low_battery_mode_status,
    "get_low_battery_mode_status": get_low_battery_mode_status,
    "set_location_service_status": set_location_service_status,
    "get_location_service_status": get_location_service_status,
    "set_cellular_service_status": set_cellular_service_status,
    "get_cellular_service_status": get_cellular_service_status,
    "set_wifi_status": set_wifi_status,
    "get_wifi_status": get_wifi_status,
    "get_current_location": get_current_location,
    "add_contact": add_contact,
    "modify_contact": modify_contact,
    "remove_contact": remove_contact,
    "search_contacts": search_contacts,
    "send_message_with_phone_number": send_message_with_phone_number,
    "search_messages": search_messages,
    "add_reminder": add_reminder,
    "modify_reminder": modify_reminder,
    "search_reminder": search_reminder,
    "remove_reminder": remove_reminder,
    "get_current_timestamp": get_current_timestamp,
    "timestamp_to_datetime_info": timestamp_to_datetime_info,
    "datetime_info_to_timestamp": datetime_info_to_timestamp,
    "shift_timestamp": shift_timestamp,
    "timestamp_diff": timestamp_diff,
    "seconds_to_hours_minutes_seconds": utilities.seconds_to_hours_minutes_seconds,
    "unit_conversion": utilities.unit_conversion,
    "calculate_lat_lon_distance": utilities.calculate_lat_lon_distance,
    "search_holiday": utilities.search_holiday,
    "search_lat_lon": web_search.search_lat_lon,
    "search_location_around_lat_lon": web_search.search_location_around_lat_lon,
    "search_weather_around_lat_lon": web_search.search_weather_around_lat_lon,
    "search_stock": web_search.search_stock,
    "convert_currency": web_search.convert_currency,
}
