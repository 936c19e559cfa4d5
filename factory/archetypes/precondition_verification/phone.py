"""Precondition verification on the phone kit.

The user dictates reminders written down earlier and asks for those whose time
has not yet passed on the phone's clock; one of them has passed and must be
left out (and the user told so).

An agent without the capability adds every reminder it is given without
checking the clock, the one already past included.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Mapping

from factory.runtime import Knob, Task, Turn, call, say
from factory.runtime.kits import phone
from factory.runtime.kits.phone.world import moment, new_phone

TOOLKIT = phone.TOOLKIT
KNOBS = (
    Knob("reminders", 2, 2, 4, "reminders dictated (one of them already past)"),
    Knob("days_apart", 10, 1, 60, "how many days from now each time may be"),
)
CHORES = (
    "collect the framed print", "send the rent transfer", "defrost the freezer",
    "call the insurance office", "repot the basil", "check the smoke alarm battery",
    "order more coffee filters", "return the borrowed ladder",
)  # fmt: skip


def _convert(when: datetime.datetime) -> Turn:
    """The gold call that turns a dictated time into a timestamp."""
    return call(
        "datetime_info_to_timestamp",
        year=when.year, month=when.month, day=when.day,
        hour=when.hour, minute=when.minute, second=0,
    )  # fmt: skip


def _add(chore: str, when: datetime.datetime) -> Turn:
    return call("add_reminder", content=chore, reminder_timestamp=when.timestamp())


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: reminders to add, one of whose times has passed."""
    state = new_phone(rng, 2)
    now = moment(state["clock"]["current_timestamp"]).replace(second=0, microsecond=0)
    count, days = knobs["reminders"], knobs["days_apart"]
    past = rng.randrange(count)
    written = []
    for index, chore in enumerate(rng.sample(CHORES, count)):
        offset = datetime.timedelta(
            days=rng.randint(1, days), minutes=rng.randint(1, 600)
        )
        when = now - offset if index == past else now + offset
        written.append((chore, when.replace(minute=when.minute // 5 * 5)))
    listing = "; ".join(
        f'"{chore}" on {when:%Y-%m-%d} at {when:%H:%M}' for chore, when in written
    )
    instruction = (
        f"I wrote these reminders on paper: {listing} (UTC). Put them in my phone, "
        "but only the ones still ahead of the phone's clock; skip any that has "
        "passed and say which."
    )
    late = written[past][0]
    due = [(chore, when) for chore, when in written if chore != late]
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=(
            call("get_current_timestamp"),
            *(_convert(when) for _, when in written),
            *(_add(chore, when) for chore, when in due),
            say(
                f'Added {len(due)}; "{late}" was skipped: its time has already passed.'
            ),
        ),
        required_facts=(late,),
        lacking_turns=(
            *(
                turn
                for chore, when in written
                for turn in (_convert(when), _add(chore, when))
            ),
            say(f"All {count} reminders are in your phone."),
        ),
    )
