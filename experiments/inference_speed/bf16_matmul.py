"""bfloat16 vs float32 matmul time on this CPU, as a ratio measured in the same run.

Whether `--precision bf16` pays off on a CPU: a prefill- or training-sized product
(512 rows), a batch of decodes (16) and one decode (1), with the 1.5B Qwen MLP's shape;
with `--model`, also that model's whole forward pass, loaded as the trainer loads it
(`load_base` and `mixed_precision`), on an agent-length prompt and on 16 rows at once.
    python experiments/inference_speed/bf16_matmul.py [--repeats 10] [--model models/qwen2.5-coder-1.5b-instruct.gguf]
"""

from __future__ import annotations

import argparse
import time

import torch


def seconds(product, repeats: int) -> float:
    """Best time of `repeats` runs of `product` (after one warm-up)."""
    product()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product()
        best = min(best, time.perf_counter() - start)
    return best


def forwards(model_path: str) -> None:
    """The model's forward time in fp32 and in bf16: one 1,800-token prompt (an agent's
    system prompt and tools) and 16 rows of 256 tokens (a training or rollout batch)."""
    from trainer.models import load_base, mixed_precision

    prompt = torch.randint(100, 20_000, (1, 1800))
    rows = prompt[:, :256].repeat(16, 1)
    times = {}
    for precision in ("fp32", "bf16"):
        model, _ = load_base(model_path, device="cpu", precision=precision)
        model.eval()
        with torch.no_grad(), mixed_precision(precision, model):
            model(prompt[:, :64])  # warm-up
            times[precision] = [
                seconds(lambda x=x, m=model: m(x), repeats=1) for x in (prompt, rows)
            ]
        model = None  # the next precision's copy loads without this one beside it
    for index, shape in enumerate(("1 x 1,800 tokens", "16 x 256 tokens")):
        fp32, bf16 = times["fp32"][index], times["bf16"][index]
        print(
            f"{model_path} forward, {shape}: fp32 {fp32:.1f} s, bf16 {bf16:.1f} s, "
            f"bf16 / fp32 = {bf16 / fp32:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--model", help="also time this model's forward pass")
    arguments = parser.parse_args()
    repeats = arguments.repeats
    weight = torch.randn(8960, 1536)
    bf16_weight = weight.bfloat16()
    print(
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}, AVX512-BF16 "
        f"{torch.cpu._is_avx512_bf16_supported()}, AMX {torch.cpu._is_amx_tile_supported()}"
    )
    for rows in (512, 16, 1):  # prefill or training, a batch of decodes, one decode
        x = torch.randn(rows, 1536)
        fp32 = seconds(lambda x=x: x @ weight.T, repeats)
        bf16 = seconds(lambda x=x: x.bfloat16() @ bf16_weight.T, repeats)
        print(
            f"{rows:>4} x 1536 x 8960: fp32 {fp32 * 1e3:8.2f} ms, bf16 {bf16 * 1e3:8.2f} ms, "
            f"bf16 / fp32 = {bf16 / fp32:.2f}"
        )
    if arguments.model:
        forwards(arguments.model)


if __name__ == "__main__":
    main()
