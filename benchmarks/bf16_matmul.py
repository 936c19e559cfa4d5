"""bfloat16 vs float32 matmul time on this CPU, as a ratio measured in the same run.

Whether `--precision bf16` pays off on a CPU: a prefill- or training-sized product
(512 rows), a batch of decodes (16) and one decode (1), with the 1.5B Qwen MLP's shape.
    python benchmarks/bf16_matmul.py [--repeats 10]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    repeats = parser.parse_args().repeats
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


if __name__ == "__main__":
    main()
