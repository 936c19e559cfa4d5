"""Offline detectors on small hand-built trajectories."""

from __future__ import annotations

import json
from typing import Any

from factory.archetypes import archetypes
from factory.trajectory.labels import Label
from factory.trajectory.records import Trajectory


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "function": function}],
    }


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def trajectory(messages: list[dict], success: bool = False, **extra: Any) -> Trajectory:
    return Trajectory(
        task_id="t", messages=messages, reward=float(success), success=success, **extra
    )


def label(archetype: str, t: Trajectory) -> Label:
    return archetypes()[archetype].detector(t).label


SEND = [
    {"role": "user", "content": "Text Ann that I am late"},
    call("send_message_with_phone_number", "1", phone_number="+1555", content="late"),
    result("1", "Error: ConnectionError: Cellular service is not enabled"),
]


def test_permission_recovery_present_lacking_and_na() -> None:
    fixed = SEND + [
        call("set_cellular_service_status", "2", on=True),
        result("2", "null"),
        call(
            "send_message_with_phone_number", "3", phone_number="+1555", content="late"
        ),
        result("3", '"msg-1"'),
    ]
    assert label("permission_error_recovery", trajectory(fixed, True)) is Label.PRESENT
    gave_up = SEND + [{"role": "assistant", "content": "Sorry, I can't."}]
    assert label("permission_error_recovery", trajectory(gave_up)) is Label.LACKING
    assert label("permission_error_recovery", trajectory(SEND[:1])) is Label.NA


def test_date_time_without_date_tools_is_lacking() -> None:
    messages = [
        {"role": "user", "content": "Remind me to call mom in 3 days at 9"},
        call("add_reminder", "1", content="call mom", reminder_timestamp=1.7e9),
        result("1", '"r1"'),
    ]
    assert label("date_time_recovery", trajectory(messages)) is Label.LACKING
    with_tools = (
        messages[:1]
        + [call("get_current_timestamp", "0"), result("0", "1.69e9")]
        + messages[1:]
    )
    assert label("date_time_recovery", trajectory(with_tools, True)) is Label.PRESENT
    assert (
        label("date_time_recovery", trajectory([{"role": "user", "content": "hi"}]))
        is Label.NA
    )


def test_a_holiday_without_its_year_is_a_relative_date() -> None:
    """ "Thanksgiving at 19:15": which year's comes from the clock, so a reminder set
    without the date tools lacks the capability."""
    messages = [
        {
            "role": "user",
            "content": 'Add a reminder "pay rent" for Thanksgiving at 19:15.',
        },
        call("add_reminder", "1", content="pay rent", reminder_timestamp=1.7e9),
        result("1", '"r1"'),
    ]
    assert label("date_time_recovery", trajectory(messages)) is Label.LACKING


def test_the_date_time_package_is_fitted_to_the_failures() -> None:
    """The phone package's knobs cover the failed runs: the kinds of relative date
    they used (holidays are the fourth kind) and how far ahead, never narrower than
    the package's defaults (3 kinds, 10 days); its share of messages follows every
    run, so a package fitted to failed reminders alone still asks for messages as
    the target does."""
    fit = archetypes()["date_time_recovery"].fit

    def run(request: str, tool: str) -> Trajectory:
        arguments = {"content": "x", "reminder_timestamp": 1.7e9}
        return trajectory(
            [{"role": "user", "content": request}, call(tool, "1", **arguments)]
        )

    runs = [
        run("Add a reminder for 9 days from today at 10:30.", "add_reminder"),
        run("Add a reminder for Thanksgiving at 19:15.", "add_reminder"),
        run("Add a reminder for this coming Friday at 08:00.", "add_reminder"),
        run("Text Ann: dinner in 3 days", "send_message_with_phone_number"),
    ]
    assert fit("phone", runs, runs) == {
        "share_messages": 25,
        "expression_kinds": 4,
        "horizon_days": 10,
    }
    asked = [*runs, run("Text Bo: see you at noon", "send_message_with_phone_number")]
    assert fit("phone", runs[:1], asked) == {
        "share_messages": 40,  # 2 of the 5 requests, though the one failure reminded
        "expression_kinds": 3,  # one kind seen, the defaults' three kept
        "horizon_days": 10,
    }
    far = run("Add a reminder for 21 days from today at 9:00.", "add_reminder")
    assert fit("phone", [far], []) == {
        "share_messages": 0,
        "expression_kinds": 3,
        "horizon_days": 21,  # wider than the default where a failure went further
    }
    # failures that say no number of days (the errands target's "50 hours from
    # now", "the day after tomorrow") keep the default horizon
    hours = run("Nudge me to call Bo 50 hours from now.", "add_reminder")
    assert fit("phone", [hours], [hours])["horizon_days"] == 10
    assert fit("airline", runs, runs) == {} and fit("phone", [], runs) == {}
    # the spec factory generate builds from accepts them
    from factory.runtime.task import resolve_knobs

    knobs = archetypes()["date_time_recovery"].knobs("phone")
    assert resolve_knobs(knobs, fit("phone", runs, runs))["expression_kinds"] == 4


def test_a_wrong_date_written_in_a_message_is_the_date_detectors() -> None:
    """Asked for a relative date in a message's text, a wrong date there is a date-time
    deficit, not an imprecise argument."""
    content = "Dinner on {}"
    messages = [
        {"role": "user", "content": 'Text Ann "Dinner on DATE", DATE 3 days from today'},
        call("get_current_timestamp", "0"),
        result("0", "1.69e9"),
        call("send_message_with_phone_number", "1", phone_number="+1555",
             content=content.format("2023-08-01")),
        result("1", '"m1"'),
    ]  # fmt: skip
    expected = [
        {
            "name": "send_message_with_phone_number",
            "arguments": {
                "phone_number": "+1555",
                "content": content.format("2023-08-02"),
            },
        }
    ]
    run = trajectory(messages, expected_actions=expected)
    assert label("date_time_recovery", run) is Label.LACKING
    assert label("tool_calling_precision", run) is Label.PRESENT
    other = json.loads(json.dumps(messages).replace("Dinner on 2023", "Lunch on 2023"))
    assert label(
        "tool_calling_precision", trajectory(other, expected_actions=expected)
    ) is (Label.LACKING)


EXPECTED = [
    {"name": "get_order_details", "arguments": {"order_id": "#W1"}},
    {
        "name": "return_delivered_order_items",
        "arguments": {
            "order_id": "#W1",
            "item_ids": ["1"],
            "payment_method_id": "credit_card_1",
        },
    },
]


def test_tool_calling_precision_compares_with_the_reference() -> None:
    wrong = [
        call("get_order_details", "1", order_id="#W1"),
        result("1", "{}"),
        call(
            "return_delivered_order_items",
            "2",
            order_id="#W1",
            item_ids=["1"],
            payment_method_id="gift_card_9",
        ),
        result("2", "{}"),
    ]
    t = trajectory(wrong, expected_actions=EXPECTED)
    judgement = archetypes()["tool_calling_precision"].detector(t)
    assert judgement.label is Label.LACKING and "payment_method_id" in judgement.reason
    right = json.loads(json.dumps(wrong).replace("gift_card_9", "credit_card_1"))
    assert (
        label(
            "tool_calling_precision", trajectory(right, True, expected_actions=EXPECTED)
        )
        is Label.PRESENT
    )


def test_multi_step_partial_completion_is_lacking() -> None:
    expected = [
        {
            "name": "cancel_pending_order",
            "arguments": {"order_id": "#W1", "reason": "no longer needed"},
        },
        {"name": "modify_user_address", "arguments": {"user_id": "u"}},
    ]
    done_one = [
        call("cancel_pending_order", "1", order_id="#W1", reason="no longer needed"),
        result("1", "{}"),
    ]
    assert (
        label(
            "multi_step_task_completion",
            trajectory(done_one, expected_actions=expected),
        )
        is Label.LACKING
    )
    done_two = done_one + [
        call("modify_user_address", "2", user_id="u"),
        result("2", "{}"),
    ]
    assert (
        label(
            "multi_step_task_completion",
            trajectory(done_two, True, expected_actions=expected),
        )
        is Label.PRESENT
    )


def test_multi_step_leaves_a_stop_at_a_refused_call_to_error_recovery() -> None:
    """Enabled the service but never sent again: the refused call was not made good,
    so the undone send is error recovery's (the permission detector's): NA here."""
    send = SEND[1]["tool_calls"][0]["function"]
    expected = [
        {"name": send["name"], "arguments": json.loads(send["arguments"])},
        {"name": "set_cellular_service_status", "arguments": {"on": True}},
        {"name": send["name"], "arguments": json.loads(send["arguments"])},
    ]
    enabled = SEND + [
        call("set_cellular_service_status", "2", on=True),
        result("2", "null"),
    ]
    stopped = trajectory(enabled, expected_actions=expected)
    assert label("multi_step_task_completion", stopped) is Label.NA
    assert label("permission_error_recovery", stopped) is Label.LACKING
    resent = enabled + [
        call(
            "send_message_with_phone_number", "3", phone_number="+1555", content="late"
        ),
        result("3", '"msg-1"'),
    ]
    done = trajectory(resent, True, expected_actions=expected)
    assert label("multi_step_task_completion", done) is Label.PRESENT
    # A refused lookup (a read) is not a refused operation: stopping early still is.
    lookup = [
        call("find_user_id_by_email", "4", email="a@b.c"),
        result("4", "Error: user not found"),
    ]
    two = [
        {"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}},
        {"name": "modify_user_address", "arguments": {"user_id": "u"}},
    ]
    one_done = lookup + [
        call("cancel_pending_order", "5", order_id="#W1"),
        result("5", "{}"),
    ]
    early = trajectory(one_done, expected_actions=two)
    assert label("multi_step_task_completion", early) is Label.LACKING


def test_multi_step_does_not_count_a_fix_between_two_identical_calls() -> None:
    """Turning location on between two location reads only lets the read work: a
    reminder added with made-up coordinates did the one requested operation."""
    expected = [
        {"name": "get_current_location", "arguments": {}},
        {"name": "set_location_service_status", "arguments": {"on": True}},
        {"name": "get_current_location", "arguments": {}},
        {"name": "add_reminder", "arguments": {"content": "x", "latitude": 1.5}},
        {"name": "send_message_with_phone_number", "arguments": {"content": "y"}},
    ]
    made_up = [
        {"role": "user", "content": "Remind me here, then text Bo"},
        call("add_reminder", "1", content="x", latitude=37.7),
        result("1", '"r-1"'),
    ]
    reminded = trajectory(made_up, expected_actions=expected[:4])
    assert label("multi_step_task_completion", reminded) is Label.NA
    # the message left unsent is still a requested operation left undone
    unsent = trajectory(made_up, expected_actions=expected)
    judgement = archetypes()["multi_step_task_completion"].detector(unsent)
    assert judgement.label is Label.LACKING
    assert "did 1 of 2" in judgement.reason and "set_location" not in judgement.reason


def test_precondition_write_without_read_is_lacking() -> None:
    unchecked = [
        call("cancel_reservation", "1", reservation_id="ABC123"),
        result("1", "{}"),
    ]
    assert label("precondition_verification", trajectory(unchecked)) is Label.LACKING
    checked = [
        call("get_reservation_details", "0", reservation_id="ABC123"),
        result("0", "{}"),
    ] + unchecked
    assert (
        label("precondition_verification", trajectory(checked, True)) is Label.PRESENT
    )
    extra = trajectory(
        checked, expected_actions=[{"name": "get_reservation_details", "arguments": {}}]
    )
    assert label("precondition_verification", extra) is Label.LACKING


def test_structured_data_numbers_and_facts() -> None:
    expected = [
        {
            "name": "book_reservation",
            "arguments": {
                "user_id": "u",
                "payment_methods": [{"payment_id": "c", "amount": 450}],
            },
        }
    ]
    wrong = [
        call(
            "book_reservation",
            "1",
            user_id="u",
            payment_methods=[{"payment_id": "c", "amount": 500}],
        ),
        result("1", "Error: amount"),
    ]
    judgement = archetypes()["structured_data_reasoning"].detector(
        trajectory(wrong, expected_actions=expected)
    )
    assert judgement.label is Label.LACKING and "450" in judgement.reason
    right = json.loads(json.dumps(wrong).replace("500", "450"))
    silent = trajectory(
        right, expected_actions=expected, metadata={"required_facts": ["450"]}
    )
    # Saying nothing is not reasoning wrong: the deficit is a wrong number told.
    assert label("structured_data_reasoning", silent) is Label.PRESENT
    misread = trajectory(
        right + [{"role": "assistant", "content": "Total: $405."}],
        True,
        expected_actions=expected,
        metadata={"required_facts": ["450"]},
    )
    judgement = archetypes()["structured_data_reasoning"].detector(misread)
    assert judgement.label is Label.LACKING and "405" in judgement.reason
    told = trajectory(
        right + [{"role": "assistant", "content": "Total: $450."}],
        True,
        expected_actions=expected,
        metadata={"required_facts": ["450"]},
    )
    assert label("structured_data_reasoning", told) is Label.PRESENT


def test_precondition_lookup_by_email_counts_as_a_read() -> None:
    looked_up = [
        call("find_user_id_by_email", "0", email="ann@example.com"),
        result("0", "ann_lee_123"),
        call("modify_user_address", "1", user_id="ann_lee_123", city="Austin"),
        result("1", "{}"),
    ]
    assert (
        label("precondition_verification", trajectory(looked_up, True)) is Label.PRESENT
    )
