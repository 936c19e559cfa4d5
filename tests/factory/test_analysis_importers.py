"""Importers on real-format files, and their errors on malformed records."""

from __future__ import annotations

import json

import pytest

from factory.analyze.importers import BadRecord, detect_format, import_paths
from factory.analyze.simulate import simulate
from factory.errors import FactoryError
from factory.trajectory.records import write_jsonl
from tests.conftest import ROOT

PACKAGE = ROOT / "generated_envs" / "tool_calling_precision"


@pytest.fixture
def tau2_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(
        json.dumps(simulate([PACKAGE], {"tool_calling_precision": 0.5}, 12, seed=4))
    )
    return path


def test_tau2_results_become_openai_records(tau2_file) -> None:
    result = import_paths([tau2_file])
    assert result.formats == {str(tau2_file): "tau2"}
    trajectory = result.trajectories[0]
    calls = [m for m in trajectory.messages if m.get("tool_calls")]
    assert calls and isinstance(calls[0]["tool_calls"][0]["function"]["arguments"], str)
    assert (
        trajectory.expected_actions and trajectory.metadata["reward_info"]["db_check"]
    )
    assert {t.success for t in result.trajectories} == {True, False}
    assert all(t.success == (t.reward == 1.0) for t in result.trajectories)


def test_tau2_results_validate_against_tau2_bench_models(tau2_file) -> None:
    simulation = pytest.importorskip("tau2.data_model.simulation")
    simulation.Results.model_validate_json(tau2_file.read_text())


def test_folder_of_tau2_results(tau2_file, tmp_path) -> None:
    folder = tmp_path / "submission" / "trajectories"
    folder.mkdir(parents=True)
    (folder / "a.json").write_text(tau2_file.read_text())
    (folder / "b.json").write_text(tau2_file.read_text())
    assert detect_format(tmp_path / "submission") == "tau2"
    assert len(import_paths([tmp_path / "submission"]).trajectories) == 24


def test_jsonl_round_trip(tau2_file, tmp_path) -> None:
    records = import_paths([tau2_file]).trajectories
    path = tmp_path / "records.jsonl"
    write_jsonl(path, records)
    assert import_paths([path]).trajectories == records


def test_toolsandbox_folder(tmp_path) -> None:
    run = tmp_path / "agent_x_user_y_01_01_2026_00_00_00"
    summary = {
        "per_scenario_results": [],
        "category_aggregated_results": {},
        "git_sha": None,
    }
    for name, similarity in (
        ("send_message_cellular_off", 1.0),
        ("add_reminder_tomorrow", 0.5),
    ):
        summary["per_scenario_results"].append(
            {
                "name": name,
                "categories": ["STATE_DEPENDENCY"],
                "traceback": None,
                "exception_type": None,
                "milestone_similarity": similarity,
                "minefield_similarity": 0.0,
                "similarity": similarity,
                "turn_count": 6,
                "milestone_mapping": {},
                "minefield_mapping": {},
            }
        )
        folder = run / "trajectories" / name
        folder.mkdir(parents=True)
        conversation = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Text Fredrik I am late"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "set_cellular_service_status",
                            "arguments": '{"on": true}',
                        },
                    }
                ],
                "assistant_details": {"database_update": {}},
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "name": "set_cellular_service_status",
                "content": "None",
            },
        ]
        (folder / "conversation.json").write_text(json.dumps(conversation))
    (run / "result_summary.json").write_text(json.dumps(summary))
    records = import_paths([run]).trajectories
    assert [t.success for t in records] == [True, False]
    assert (
        records[1].reward == 0.5 and "assistant_details" not in records[0].messages[2]
    )
    assert [t.success for t in import_paths([run], threshold=0.4).trajectories] == [
        True,
        True,
    ]


def test_malformed_records_name_file_record_and_field(tmp_path) -> None:
    good = {"task_id": "a", "messages": [], "reward": 1.0, "success": True}
    path = tmp_path / "runs.jsonl"
    path.write_text(
        "\n".join(
            [json.dumps(good), "{not json", json.dumps({**good, "reward": "high"})]
        )
        + "\n"
    )
    with pytest.raises(BadRecord, match=r"runs.jsonl: line 2: not valid JSON"):
        import_paths([path])
    result = import_paths([path], skip_bad=True)
    assert len(result.trajectories) == 1 and len(result.skipped) == 2
    assert "line 3: field 'reward'" in result.skipped[1]


def test_tau2_simulation_without_messages(tmp_path, tau2_file) -> None:
    data = json.loads(tau2_file.read_text())
    del data["simulations"][3]["messages"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        BadRecord, match=r"simulations\[3\]: field 'messages' is missing"
    ):
        import_paths([path])
    assert len(import_paths([path], skip_bad=True).trajectories) == 11


def test_unknown_inputs_are_refused(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(FactoryError, match="unknown format"):
        import_paths([tmp_path / "notes.txt"])
    with pytest.raises(FactoryError, match="no such file"):
        import_paths([tmp_path / "missing.json"])


def test_records_keep_the_sources_ids(tau2_file, tmp_path) -> None:
    """tau2's simulation id and trial, and ToolSandbox's scenario, survive import."""
    data = json.loads(tau2_file.read_text())
    record = import_paths([tau2_file]).trajectories[0]
    simulation = data["simulations"][0]
    assert record.metadata["simulation_id"] == simulation["id"]
    assert record.reference == (
        f"task {simulation['task_id']}, simulation {simulation['id']}, "
        f"trial {simulation['trial']}"
    )
    test_toolsandbox_folder(tmp_path)
    run = next(tmp_path.glob("agent_x_*"))
    records = import_paths([run]).trajectories
    assert [t.reference for t in records] == [
        "scenario send_message_cellular_off",
        "scenario add_reminder_tomorrow",
    ]


def test_long_source_ids_are_cited_clipped() -> None:
    """Ids come from the user's files: a 5,000-character id is cited in 80 + a count."""
    from factory.trajectory.records import Trajectory

    record = Trajectory(
        task_id="t" * 5000,
        messages=[],
        reward=0.0,
        success=False,
        metadata={"simulation_id": "s" * 5000, "trial": 1},
    )
    assert record.run_id == "s" * 5000  # matching --truth uses the whole id
    assert len(record.reference) < 250 and record.reference.endswith("trial 1")
