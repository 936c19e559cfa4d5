"""Greedy episodes of one adapter (or `base`) on the demo run's 20 held-out
phone-target seeds, with its limits; run from the repository root.

python eval_heldout.py ADAPTER_DIR|base OUT.json
"""

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent.parent))  # experiments/phone_demonstration/
from phone_adapter import play  # noqa: E402

from trace_pipeline.targets import phone  # noqa: E402
from trainer.models import load_adapter, load_base  # noqa: E402

run = json.load(gzip.open(HERE.parent / "evaluate_transcripts.json.gz"))
seeds = [e["seed"] for e in run["base"]]
difficulty = {"give_numbers": 1, "say_done": 1}
adapter, out = sys.argv[1], Path(sys.argv[2])
settings = argparse.Namespace(
    max_turns=8, max_new_tokens=96, max_total_tokens=6144, precision="fp32"
)
model, tok = load_base("models/qwen2.5-coder-1.5b-instruct.gguf", precision="fp32")
if adapter != "base":
    model = load_adapter(model, adapter)
start = time.perf_counter()
episodes = play(model, tok, seeds, settings, difficulty)
for e in episodes:
    e["needs"] = phone.needs(e["seed"], difficulty)
out.write_text(
    json.dumps({"seconds": time.perf_counter() - start, "episodes": episodes})
)
print(
    out,
    sum(e["success"] for e in episodes),
    "/",
    len(episodes),
    time.perf_counter() - start,
)
