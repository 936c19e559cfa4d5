"""Tools of the Phone (ToolSandbox) target, for the `permission_error_recovery` training environment.

Tool names and parameters are those of ToolSandbox (apple/ToolSandbox); the implementations
are this package's own and act on the JSON state built by `generator.py`. Every
tool checks its preconditions before it touches the state, so a call that fails
with `ToolError` never changes it.
"""

from __future__ import annotations

import datetime
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

State = dict[str, Any]

POLICY = """\
- The device clock and all dates are in UTC. Use get_current_timestamp and the date tools to resolve relative dates and times; never assume today's date.
- Phone numbers are in international format, e.g. '+12453344098'. Find a contact's number with search_contacts.
- Sending a message needs cellular service on; get_current_location needs location service on.
- Low battery mode switches cellular, wifi and location service off, and they cannot be turned on again while it is on. Turning low battery mode off does not turn them back on.
- Setting a status to the value it already has is an error.
- When a tool fails because a setting is off, enable what is needed and retry; do not give up while the tools can fix it.
- Change only the settings and records the request needs."""

TOOL_SCHEMAS: list[dict[str, Any]] = json.loads(
    r"""
[
    {
        "type": "function",
        "function": {
            "name": "set_low_battery_mode_status",
            "description": "Turn low battery mode on or off.",
            "parameters": {
                "type": "object",
                "properties": {
                    "on": {
                        "type": "boolean",
                        "description": "True to turn low battery mode on, False to turn it off."
                    }
                },
                "required": [
                    "on"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_low_battery_mode_status",
            "description": "Whether low battery mode is on.",
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
            "name": "set_location_service_status",
            "description": "Turn location service on or off.",
            "parameters": {
                "type": "object",
                "properties": {
                    "on": {
                        "type": "boolean",
                        "description": "True to turn location service on, False to turn it off."
                    }
                },
                "required": [
                    "on"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_location_service_status",
            "description": "Whether location service is on.",
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
            "name": "set_cellular_service_status",
            "description": "Turn cellular service on or off.",
            "parameters": {
                "type": "object",
                "properties": {
                    "on": {
                        "type": "boolean",
                        "description": "True to turn cellular service on, False to turn it off."
                    }
                },
                "required": [
                    "on"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_cellular_service_status",
            "description": "Whether cellular service is on.",
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
            "name": "set_wifi_status",
            "description": "Turn wifi on or off.",
            "parameters": {
                "type": "object",
                "properties": {
                    "on": {
                        "type": "boolean",
                        "description": "True to turn wifi on, False to turn it off."
                    }
                },
                "required": [
                    "on"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_wifi_status",
            "description": "Whether wifi is on.",
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
            "name": "get_current_location",
            "description": "The device's current latitude and longitude. Needs location service on.",
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
            "name": "add_contact",
            "description": "Add a contact and return its person_id.",
            "parameters": {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "The contact's full name."
                    },
                    "phone_number": {
                        "type": "string",
                        "description": "Phone number in international format, e.g. '+12453344098'."
                    },
                    "relationship": {
                        "type": "string",
                        "description": "How the contact relates to the user, e.g. 'friend'."
                    },
                    "is_self": {
                        "type": "boolean",
                        "description": "True if this contact is the user."
                    }
                },
                "required": [
                    "name",
                    "phone_number"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "modify_contact",
            "description": "Change fields of an existing contact; give at least one field.",
            "parameters": {
                "type": "object",
                "properties": {
                    "person_id": {
                        "type": "string",
                        "description": "The contact's person_id."
                    },
                    "name": {
                        "type": "string",
                        "description": "New full name."
                    },
                    "phone_number": {
                        "type": "string",
                        "description": "New phone number."
                    },
                    "relationship": {
                        "type": "string",
                        "description": "New relationship."
                    },
                    "is_self": {
                        "type": "boolean",
                        "description": "Whether this contact is the user."
                    }
                },
                "required": [
                    "person_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "remove_contact",
            "description": "Delete a contact.",
            "parameters": {
                "type": "object",
                "properties": {
                    "person_id": {
                        "type": "string",
                        "description": "The contact's person_id."
                    }
                },
                "required": [
                    "person_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "search_contacts",
            "description": "Find contacts matching every given field (name matches case-insensitively on words); give at least one field.",
            "parameters": {
                "type": "object",
                "properties": {
                    "person_id": {
                        "type": "string",
                        "description": "Exact person_id."
                    },
                    "name": {
                        "type": "string",
                        "description": "Name, or part of it."
                    },
                    "phone_number": {
                        "type": "string",
                        "description": "Exact phone number."
                    },
                    "relationship": {
                        "type": "string",
                        "description": "Relationship, e.g. 'friend'."
                    },
                    "is_self": {
                        "type": "boolean",
                        "description": "True for the user's own contact."
                    }
                },
                "required": []
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "send_message_with_phone_number",
            "description": "Send a text message and return its message_id. Needs cellular service on.",
            "parameters": {
                "type": "object",
                "properties": {
                    "phone_number": {
                        "type": "string",
                        "description": "Recipient phone number in international format."
                    },
                    "content": {
                        "type": "string",
                        "description": "The message text."
                    }
                },
                "required": [
                    "phone_number",
                    "content"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "search_messages",
            "description": "Find messages matching every given field; give at least one field.",
            "parameters": {
                "type": "object",
                "properties": {
                    "message_id": {
                        "type": "string",
                        "description": "Exact message_id."
                    },
                    "sender_person_id": {
                        "type": "string",
                        "description": "Sender's person_id."
                    },
                    "sender_phone_number": {
                        "type": "string",
                        "description": "Sender's phone number."
                    },
                    "recipient_person_id": {
                        "type": "string",
                        "description": "Recipient's person_id."
                    },
                    "recipient_phone_number": {
                        "type": "string",
                        "description": "Recipient's phone number."
                    },
                    "content": {
                        "type": "string",
                        "description": "Words the message contains."
                    },
                    "creation_timestamp_lowerbound": {
                        "type": "number",
                        "description": "Earliest creation time, POSIX seconds."
                    },
                    "creation_timestamp_upperbound": {
                        "type": "number",
                        "description": "Latest creation time, POSIX seconds."
                    }
                },
                "required": []
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "add_reminder",
            "description": "Add a reminder and return its reminder_id.",
            "parameters": {
                "type": "object",
                "properties": {
                    "content": {
                        "type": "string",
                        "description": "What to be reminded of."
                    },
                    "reminder_timestamp": {
                        "type": "number",
                        "description": "When to remind, POSIX seconds."
                    },
                    "latitude": {
                        "type": "number",
                        "description": "Latitude of the place to remind at."
                    },
                    "longitude": {
                        "type": "number",
                        "description": "Longitude of the place to remind at."
                    }
                },
                "required": [
                    "content",
                    "reminder_timestamp"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "modify_reminder",
            "description": "Change fields of an existing reminder; give at least one field.",
            "parameters": {
                "type": "object",
                "properties": {
                    "reminder_id": {
                        "type": "string",
                        "description": "The reminder's id."
                    },
                    "content": {
                        "type": "string",
                        "description": "New content."
                    },
                    "reminder_timestamp": {
                        "type": "number",
                        "description": "New time, POSIX seconds."
                    },
                    "latitude": {
                        "type": "number",
                        "description": "New latitude."
                    },
                    "longitude": {
                        "type": "number",
                        "description": "New longitude."
                    }
                },
                "required": [
                    "reminder_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "search_reminder",
            "description": "Find reminders matching every given field; give at least one field.",
            "parameters": {
                "type": "object",
                "properties": {
                    "reminder_id": {
                        "type": "string",
                        "description": "Exact reminder id."
                    },
                    "content": {
                        "type": "string",
                        "description": "Words the reminder contains."
                    },
                    "creation_timestamp_lowerbound": {
                        "type": "number",
                        "description": "Earliest creation time, POSIX seconds."
                    },
                    "creation_timestamp_upperbound": {
                        "type": "number",
                        "description": "Latest creation time, POSIX seconds."
                    },
                    "reminder_timestamp_lowerbound": {
                        "type": "number",
                        "description": "Earliest reminder time, POSIX seconds."
                    },
                    "reminder_timestamp_upperbound": {
                        "type": "number",
                        "description": "Latest reminder time, POSIX seconds."
                    },
                    "latitude": {
                        "type": "number",
                        "description": "Exact latitude."
                    },
                    "longitude": {
                        "type": "number",
                        "description": "Exact longitude."
                    }
                },
                "required": []
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "remove_reminder",
            "description": "Delete a reminder.",
            "parameters": {
                "type": "object",
                "properties": {
                    "reminder_id": {
                        "type": "string",
                        "description": "The reminder's id."
                    }
                },
                "required": [
                    "reminder_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_current_timestamp",
            "description": "The current time as POSIX seconds (the device clock, UTC).",
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
            "name": "timestamp_to_datetime_info",
            "description": "Split POSIX seconds into year, month, day, hour, minute, second and isoweekday (1 = Monday ... 7 = Sunday), in UTC.",
            "parameters": {
                "type": "object",
                "properties": {
                    "timestamp": {
                        "type": "number",
                        "description": "POSIX seconds."
                    }
                },
                "required": [
                    "timestamp"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "datetime_info_to_timestamp",
            "description": "POSIX seconds of a calendar date and time in UTC.",
            "parameters": {
                "type": "object",
                "properties": {
                    "year": {
                        "type": "integer",
                        "description": "Year, e.g. 2025."
                    },
                    "month": {
                        "type": "integer",
                        "description": "Month 1-12."
                    },
                    "day": {
                        "type": "integer",
                        "description": "Day of the month."
                    },
                    "hour": {
                        "type": "integer",
                        "description": "Hour 0-23."
                    },
                    "minute": {
                        "type": "integer",
                        "description": "Minute 0-59."
                    },
                    "second": {
                        "type": "integer",
                        "description": "Second 0-59."
                    }
                },
                "required": [
                    "year",
                    "month",
                    "day",
                    "hour",
                    "minute",
                    "second"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "shift_timestamp",
            "description": "Add (or, with negative values, subtract) a duration to POSIX seconds.",
            "parameters": {
                "type": "object",
                "properties": {
                    "timestamp": {
                        "type": "number",
                        "description": "POSIX seconds."
                    },
                    "weeks": {
                        "type": "integer",
                        "description": "Weeks to add."
                    },
                    "days": {
                        "type": "integer",
                        "description": "Days to add."
                    },
                    "hours": {
                        "type": "integer",
                        "description": "Hours to add."
                    },
                    "minutes": {
                        "type": "integer",
                        "description": "Minutes to add."
                    },
                    "seconds": {
                        "type": "integer",
                        "description": "Seconds to add."
                    }
                },
                "required": [
                    "timestamp"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "timestamp_diff",
            "description": "The time from timestamp_0 to timestamp_1 as whole days plus seconds (0-86399).",
            "parameters": {
                "type": "object",
                "properties": {
                    "timestamp_0": {
                        "type": "number",
                        "description": "Start, POSIX seconds."
                    },
                    "timestamp_1": {
                        "type": "number",
                        "description": "End, POSIX seconds."
                    }
                },
                "required": [
                    "timestamp_0",
                    "timestamp_1"
                ]
            }
        }
    }
]
"""
)


class ToolError(Exception):
    """A tool call the environment refuses; its message is sent back to the agent."""


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


def _check_coordinates(latitude: float | None, longitude: float | None) -> None:
    if latitude is not None and not -90 <= latitude <= 90:
        raise ToolError(f"ValueError: latitude {latitude} is outside [-90, 90]")
    if longitude is not None and not -180 <= longitude <= 180:
        raise ToolError(f"ValueError: longitude {longitude} is outside [-180, 180]")


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
    _check_coordinates(latitude, longitude)
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
    _check_coordinates(latitude, longitude)
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
