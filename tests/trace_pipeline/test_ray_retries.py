"""`executor: ray` tries a job that raises in a worker again, recording each try's host
and error; a job that fails every try stops the stage naming it, its host and its
error, and the jobs that finished are kept for the rerun."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from trace_pipeline.config import load_config
from trace_pipeline.context import Context
from trace_pipeline.errors import PipelineError
from trace_pipeline.executors import Job, run_jobs
from trace_pipeline.store import RunFolder

ray = pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[2]
JOBS = "tests.trace_pipeline.ray_jobs"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray cluster whose workers can import the test jobs; the signal
    handlers Ray installs in this process are put back after it (later tests check
    that the trainer leaves SIGTERM and SIGINT as it found them)."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    try:
        yield
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _context(tmp_path: Path, retries: int) -> Context:
    root = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(f"model: tiny\nexecutor: ray\nray: {{retries: {retries}}}\n")
    folder = RunFolder(root)
    folder.open(config)
    (root / "config.yaml").write_text(config.read_text())
    return Context(load_config(config), folder, config)


def test_a_job_failing_once_in_a_worker_finishes_on_the_retry(
    cluster: None, tmp_path: Path
) -> None:
    context = _context(tmp_path, retries=2)
    flag = tmp_path / "flag"
    job = Job("probe", {"env": "flaky"}, f"{JOBS}:fail_once", {"flag": str(flag)})
    (done,) = run_jobs(context, [job])
    host = socket.gethostname()
    assert (done.folder / "out.txt").read_text() == "finished\n"
    assert done.record() == [
        {"host": host, "error": "RuntimeError: the first try fails"},
        {"host": host, "error": None},
    ]


def test_a_job_failing_every_try_stops_the_stage_and_the_rest_is_kept(
    cluster: None, tmp_path: Path
) -> None:
    context = _context(tmp_path, retries=1)
    count = tmp_path / "count"
    good = Job("probe", {"env": "good"}, f"{JOBS}:finish", {"count": str(count)})
    bad = Job("probe", {"env": "broken"}, f"{JOBS}:always_fail", {})
    with pytest.raises(PipelineError) as stopped:
        run_jobs(context, [good, bad])
    message = str(stopped.value)
    assert f"probe job of broken failed 2 time(s), last on {socket.gethostname()}" in (
        message
    )
    assert "RuntimeError: this job always fails" in message
    assert "rerun `trace run` to go on" in message
    assert context.folder.finished_jobs(("probe",)) == 1 and count.read_text() == "1"
    (again,) = run_jobs(context, [good])  # the rerun reuses the finished job
    assert count.read_text() == "1" and (again.folder / "out.txt").is_file()
