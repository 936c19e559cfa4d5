"""The phone kit has ToolSandbox's tools, with its names, parameters and wifi gating."""

from __future__ import annotations

import copy
import datetime
import random

import pytest

from factory.runtime.kits import phone
from factory.runtime.kits.phone.world import new_phone
from factory.runtime.schema import ToolError

# ToolSandbox's agent-visible tools (apple/ToolSandbox, tool_sandbox/tools/*.py):
# name -> (parameters, required parameters).
TOOLSANDBOX = {
    "set_low_battery_mode_status": ({"on"}, {"on"}),
    "get_low_battery_mode_status": (set(), set()),
    "set_location_service_status": ({"on"}, {"on"}),
    "get_location_service_status": (set(), set()),
    "set_cellular_service_status": ({"on"}, {"on"}),
    "get_cellular_service_status": (set(), set()),
    "set_wifi_status": ({"on"}, {"on"}),
    "get_wifi_status": (set(), set()),
    "get_current_location": (set(), set()),
    "get_current_timestamp": (set(), set()),
    "timestamp_to_datetime_info": ({"timestamp"}, {"timestamp"}),
    "datetime_info_to_timestamp": (
        {"year", "month", "day", "hour", "minute", "second"},
        {"year", "month", "day", "hour", "minute", "second"},
    ),
    "shift_timestamp": (
        {"timestamp", "weeks", "days", "hours", "minutes", "seconds"},
        {"timestamp"},
    ),
    "timestamp_diff": ({"timestamp_0", "timestamp_1"}, {"timestamp_0", "timestamp_1"}),
    "seconds_to_hours_minutes_seconds": ({"seconds"}, {"seconds"}),
    "unit_conversion": (
        {"amount", "from_unit", "to_unit"},
        {"amount", "from_unit", "to_unit"},
    ),
    "calculate_lat_lon_distance": (
        {"latitude_0", "longitude_0", "latitude_1", "longitude_1"},
        {"latitude_0", "longitude_0", "latitude_1", "longitude_1"},
    ),
    "search_holiday": ({"holiday_name", "year"}, {"holiday_name"}),
    "search_lat_lon": ({"latitude", "longitude"}, {"latitude", "longitude"}),
    "search_location_around_lat_lon": (
        {"location", "latitude", "longitude"},
        {"location"},
    ),
    "search_weather_around_lat_lon": ({"days", "latitude", "longitude"}, set()),
    "search_stock": ({"query"}, {"query"}),
    "convert_currency": (
        {"amount", "from_currency_code", "to_currency_code"},
        {"amount", "from_currency_code", "to_currency_code"},
    ),
}
WEB = {
    "search_holiday": {"holiday_name": "Christmas"},
    "search_lat_lon": {"latitude": 37.33, "longitude": -122.03},
    "search_location_around_lat_lon": {"location": "restaurant"},
    "search_weather_around_lat_lon": {},
    "search_stock": {"query": "AAPL"},
    "convert_currency": {
        "amount": 10,
        "from_currency_code": "USD",
        "to_currency_code": "EUR",
    },
}


@pytest.fixture
def state():
    return new_phone(random.Random(7), 3)


def test_the_kit_has_toolsandboxs_tools_with_its_parameters() -> None:
    schemas = {t["function"]["name"]: t["function"] for t in phone.TOOLKIT.schemas}
    for name, (parameters, required) in TOOLSANDBOX.items():
        assert name in schemas, name
        given = schemas[name]["parameters"]
        assert set(given["properties"]) == parameters, name
        assert set(given["required"]) == required, name


@pytest.mark.parametrize("tool", sorted(WEB))
def test_every_web_search_needs_wifi_and_changes_nothing(tool, state) -> None:
    assert (
        phone.run(copy.deepcopy(state), tool, **WEB[tool]) is not None
        or tool == "search_holiday"
    )
    state["settings"]["wifi"] = False
    before = copy.deepcopy(state)
    with pytest.raises(ToolError, match="ConnectionError: Wifi is not enabled"):
        phone.run(state, tool, **WEB[tool])
    assert state == before


@pytest.mark.parametrize(
    ("name", "year", "date"),
    [
        ("Christmas", 2026, (2026, 12, 25)),
        ("thanksgiving", 2026, (2026, 11, 26)),
        ("Thanksgiving Day", 2027, (2027, 11, 25)),
        ("Memorial Day", 2027, (2027, 5, 31)),
        ("Labor Day", 2025, (2025, 9, 1)),
        ("martin luther king", 2026, (2026, 1, 19)),
        ("Juneteenth", 2025, (2025, 6, 19)),
    ],
)
def test_holidays_follow_the_legal_rules(name, year, date, state) -> None:
    found = phone.run(state, "search_holiday", holiday_name=name, year=year)
    assert found == datetime.datetime(*date, tzinfo=datetime.timezone.utc).timestamp()


def test_a_holiday_defaults_to_the_device_clocks_year(state) -> None:
    clock = datetime.datetime(2027, 3, 1, 12, tzinfo=datetime.timezone.utc)
    state["clock"]["current_timestamp"] = clock.timestamp()
    found = phone.run(state, "search_holiday", holiday_name="Christmas")
    assert (
        found
        == datetime.datetime(2027, 12, 25, tzinfo=datetime.timezone.utc).timestamp()
    )
    assert phone.run(state, "search_holiday", holiday_name="Diwali") is None


@pytest.mark.parametrize(
    ("amount", "source", "target", "expected"),
    [
        (100, "celsius", "fahrenheit", 212.0),
        (32, "Fahrenheit", "Celsius", 0.0),
        (0, "celsius", "kelvin", 273.15),
        (1, "miles", "kilometers", 1.609344),
        (10, "pounds", "kg", 4.5359237),
        (1, "gallon", "liters", 3.785411784),
        (90, "minutes", "hours", 1.5),
    ],
)
def test_unit_conversion(amount, source, target, expected, state) -> None:
    converted = phone.run(
        state, "unit_conversion", amount=amount, from_unit=source, to_unit=target
    )
    assert converted == pytest.approx(expected)


def test_unit_conversion_errors_name_the_unit(state) -> None:
    with pytest.raises(ToolError, match="UndefinedUnitError: 'furlongs'"):
        phone.run(state, "unit_conversion", amount=1, from_unit="furlongs", to_unit="m")
    with pytest.raises(ToolError, match="DimensionalityError"):
        phone.run(state, "unit_conversion", amount=1, from_unit="kg", to_unit="meter")


def test_distances_are_wgs84_geodesics(state) -> None:
    # geopy's documented example: Newport, RI to Cleveland, OH is 866.4554 km.
    newport_cleveland = phone.run(
        state, "calculate_lat_lon_distance", latitude_0=41.49008, longitude_0=-71.312796,
        latitude_1=41.499498, longitude_1=-81.695391,
    )  # fmt: skip
    assert newport_cleveland == pytest.approx(866.4554, abs=1e-3)
    equator = phone.run(
        state, "calculate_lat_lon_distance", latitude_0=0.0, longitude_0=0.0,
        latitude_1=0.0, longitude_1=1.0,
    )  # fmt: skip
    assert equator == pytest.approx(111.3195, abs=1e-3)
    antipodes = phone.run(
        state, "calculate_lat_lon_distance", latitude_0=0.0, longitude_0=0.0,
        latitude_1=0.5, longitude_1=179.7,
    )  # fmt: skip
    assert 19_900 < antipodes < 20_040
    with pytest.raises(ToolError, match="latitude_1"):
        phone.run(
            state, "calculate_lat_lon_distance", latitude_0=0.0, longitude_0=0.0,
            latitude_1=91.0, longitude_1=0.0,
        )  # fmt: skip


def test_seconds_to_hours_minutes_seconds(state) -> None:
    assert phone.run(state, "seconds_to_hours_minutes_seconds", seconds=3725) == {
        "hour": 1,
        "minute": 2,
        "second": 5,
    }


def test_searches_answer_the_same_question_the_same_way(state) -> None:
    for tool, arguments in WEB.items():
        assert phone.run(copy.deepcopy(state), tool, **arguments) == phone.run(
            copy.deepcopy(state), tool, **arguments
        )
    places = phone.run(state, "search_location_around_lat_lon", location="restaurant")
    assert 0 < len(places) <= 4 and all(p["type"] == "restaurant" for p in places)
    assert phone.run(state, "search_stock", query="Nope Corp") is None
    assert phone.run(state, "search_stock", query="apple")["symbol"] == "AAPL"
    same = phone.run(
        state, "convert_currency", amount=12.5, from_currency_code="eur",
        to_currency_code="EUR",
    )  # fmt: skip
    assert same == 12.5


def test_searching_around_here_needs_location_service(state) -> None:
    state["settings"]["location_service"] = False
    with pytest.raises(ToolError, match="PermissionError: Location service"):
        phone.run(state, "search_weather_around_lat_lon", days=1)
    assert phone.run(
        state, "search_weather_around_lat_lon", days=1, latitude=10.0, longitude=20.0
    )
    with pytest.raises(ToolError, match="both provided"):
        phone.run(
            state, "search_location_around_lat_lon", location="cafe", latitude=1.0
        )
    with pytest.raises(ToolError, match="Days must be positive"):
        phone.run(
            state, "search_weather_around_lat_lon", days=-1, latitude=1.0, longitude=1.0
        )
    with pytest.raises(ToolError, match="ISO 4217"):
        phone.run(
            state, "convert_currency", amount=1, from_currency_code="XYZ",
            to_currency_code="USD",
        )  # fmt: skip


def test_the_holiday_family_validates(tmp_path, capsys) -> None:
    """date_time_recovery with expression_kinds 4 (holidays included) passes validation."""
    import json

    from factory.cli import main
    from tests.conftest import EXAMPLES

    spec = json.loads((EXAMPLES / "date_time_recovery.json").read_text())
    spec["generation"]["difficulty"] = {"expression_kinds": 4}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert main(["generate", str(path), "--out", str(tmp_path / "out")]) == 0
    assert "PASS" in capsys.readouterr().out
    module = (tmp_path / "out" / "date_time_recovery").rglob("task.py")
    assert "search_holiday" in next(module).read_text()
