"""The demo's multi-capability baseline, trained after the fact with the code of
`trace run`'s baselines stage (`mixture_job`): one adapter on the uniform mixture
of the run's two packages, with as many optimizer steps as both single adapters
together; run from the repository root.

python train_mixture.py RUN OUT_DIR

RUN is a `trace run` folder of the demo config whose generate stage is done
(README.md says how it was rebuilt from the committed run).
"""

import sys
import time
from pathlib import Path

from factory.outputs import write_json
from trace_pipeline.config import load_config
from trace_pipeline.context import Context
from trace_pipeline.stages.baselines import mixture_job
from trace_pipeline.store import RunFolder

run, out = Path(sys.argv[1]), Path(sys.argv[2])
context = Context(load_config(run / "config.yaml"), RunFolder(run), run / "config.yaml")
envs = [
    str(run / "generate" / "envs" / n)
    for n in ("permission_error_recovery", "date_time_recovery")
]
out.mkdir(parents=True, exist_ok=True)
start = time.perf_counter()
mixture_job(context, out, envs)
write_json(out / "seconds.json", {"seconds": time.perf_counter() - start})
print(out, time.perf_counter() - start)
