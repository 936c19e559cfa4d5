"""LLM codegen with a real served model: does it write a task module that validates?

    router serve --model models/qwen2.5-coder-0.5b-instruct.gguf --port 8011 &
    OPENAI_BASE_URL=http://127.0.0.1:8011/v1 OPENAI_API_KEY=local \\
      python experiments/codegen/codegen.py examples/capabilities/*.json \\
      examples/targets/room_booking/capability.json --attempts 2 --out OUT.json

Each spec is built as given but with `archetype: null`, so `factory generate`'s
LLM backend asks the model for `task.py` and feeds every refusal back (the
static checks, the failing property, a trimmed traceback) for the next attempt.
Per spec: landed or not, the attempts used, the minutes, and each attempt's
first problems, length and opening, read from the attempts `factory generate`
keeps under `<build>/.codegen/`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from factory.errors import FactoryError
from factory.generate.build import Codegen, generate
from factory.outputs import write_json
from factory.spec import parse_spec
from factory.validate.runner import ValidationFailed

PROBLEMS_KEPT = 5  # of each attempt, in the results file
ANSWER_KEPT = 1500  # characters of each answer, in the results file


def _attempts(build: Path) -> list[dict[str, Any]]:
    """Each kept attempt of the one spec built in `build`: its problems and answer."""
    rows = []  # none when the endpoint failed before an answer
    attempts = build.glob(".codegen/*/attempt-*")
    for folder in sorted(attempts, key=lambda p: int(p.name[8:])):
        problems = (folder / "problems.txt").read_text(encoding="utf-8").split("\n")
        answer = (folder / "answer.txt").read_text("utf-8")
        rows.append(
            {
                "attempt": int(folder.name[8:]),
                "answer_chars": len(answer),
                "answer_head": answer[:ANSWER_KEPT],
                "wrote_task_py": (folder / "task.py").is_file(),
                "problems": [p for p in problems if p][:PROBLEMS_KEPT],
            }
        )
    return rows


def build(spec_file: Path, codegen: Codegen, seeds: int) -> dict[str, Any]:
    """Build `spec_file` with the LLM backend in a temporary folder; what happened."""
    # read as `factory generate` reads it: an inline target's tools file beside it
    text = spec_file.read_text(encoding="utf-8")
    spec = json.loads(parse_spec(text, str(spec_file), spec_file.parent).to_json())
    spec["archetype"] = None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / spec_file.name
        path.write_text(json.dumps(spec), encoding="utf-8")
        began = time.time()
        try:
            generate(
                path, Path(folder) / "out", validate=True, seeds=seeds, codegen=codegen
            )
            landed, error = True, None
        except (ValidationFailed, FactoryError) as exc:
            landed, error = False, str(exc).splitlines()[0]
        minutes = (time.time() - began) / 60
        tried = _attempts(Path(folder) / "out")
    return {"spec": spec["name"], "landed": landed, "attempts_used": len(tried),
            "minutes": round(minutes, 1), "error": error, "attempts": tried}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("specs", nargs="+", type=Path, help="capability.json files")
    parser.add_argument("--model", default="base", help="the served model's name")
    parser.add_argument("--attempts", type=int, default=2, help="per spec")
    parser.add_argument("--seeds", type=int, default=10, help="validation seeds")
    parser.add_argument(
        "--request-timeout", type=float, default=1800.0, help="seconds per answer"
    )
    parser.add_argument("--out", type=Path, required=True, help="results JSON")
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"--out {args.out} exists; give a new file")
    codegen = Codegen(
        backend="llm", model=args.model, attempts=args.attempts,
        request_timeout=args.request_timeout,
    )  # fmt: skip
    rows = []
    for spec in args.specs:
        rows.append(build(spec, codegen, args.seeds))
        row = rows[-1]
        print(f"{row['spec']}: {'landed' if row['landed'] else 'not landed'} after "
              f"{row['attempts_used']} attempt(s), {row['minutes']} min", flush=True)  # fmt: skip
        for attempt in row["attempts"]:
            first = attempt["problems"][0][:160] if attempt["problems"] else "valid"
            print(f"  attempt {attempt['attempt']}: {first}", flush=True)
        write_json(args.out, {"model": args.model, "attempts": args.attempts,
                              "seeds": args.seeds, "specs": rows})  # fmt: skip


if __name__ == "__main__":
    main()
