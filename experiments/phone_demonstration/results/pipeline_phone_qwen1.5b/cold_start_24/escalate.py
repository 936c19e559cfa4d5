"""Re-routing on errors with a chosen first route, on a finished run's held-out tasks.

python escalate.py RUN_FOLDER CONFIG.yaml FIRST OUT.json [ADAPTER_DIR]
FIRST: base (hold the base model until a tool call is refused) or argmax (the run's
first-turn argmax routes). ADAPTER_DIR replaces the run's permission adapter (a copy of
the run is made; the run itself is not touched).
"""

import json
import shutil
import sys
import time
from pathlib import Path

from router.modes import Route
from router.prompt import BASE
from router.routed import play_rerouting
from trace_pipeline.config import load_config
from trace_pipeline.context import Context, transcript
from trace_pipeline.stages.evaluate import REROUTE_MODE, held_out, routed_model
from trace_pipeline.store import RunFolder
from trainer.models import mixed_precision

run, config_file, first_mode, out = (
    Path(sys.argv[1]),
    Path(sys.argv[2]),
    sys.argv[3],
    Path(sys.argv[4]),
)
adapter = Path(sys.argv[5]) if len(sys.argv) > 5 else None
if adapter is not None:
    copy = out.with_suffix(".run")
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".jobs", ".lock"))
    target = copy / "route" / "adapters" / "permission_error_recovery"
    shutil.rmtree(target)
    shutil.copytree(adapter, target, ignore=shutil.ignore_patterns("checkpoint"))
    # The run's adapters list tools "compact"; Qwen's template has a tool role, so
    # the format is never used, but the bank refuses a mix: match the run's.
    trace = json.loads((target / "trace.json").read_text())
    trace["training"]["config"]["tool_format"] = "compact"
    (target / "trace.json").write_text(json.dumps(trace))
    run = copy
config = load_config(config_file)
context = Context(config, RunFolder(run), config_file)
bank, tokenizer, router, _ = routed_model(context)
tasks = list(held_out(context).values())
if first_mode == "base":
    first = [Route("base", BASE, {}) for _ in tasks]
else:
    report = json.loads((run / "evaluate" / "report.json").read_text())
    routes = {r["seed"]: r["routes"][REROUTE_MODE] for r in report["per_task"]}
    first = [
        Route(
            routes[t.seed]["mode"], routes[t.seed]["target"], routes[t.seed]["adapters"]
        )
        for t in tasks
    ]
start = time.perf_counter()
with mixed_precision(config.precision, bank.model):
    episodes, chains = play_rerouting(
        bank.generator(tokenizer),
        router,
        tokenizer,
        tasks,
        first,
        REROUTE_MODE,
        context.limits(),
        bank.capabilities.tool_format(tokenizer),
    )
rows = [
    transcript(e) | {"routes": c, "truth": t.truth}
    for e, c, t in zip(episodes, chains, tasks, strict=True)
]
out.write_text(
    json.dumps(
        {"seconds": time.perf_counter() - start, "first": first_mode, "episodes": rows}
    )
)
print(out, sum(r["success"] for r in rows), "/", len(rows))
