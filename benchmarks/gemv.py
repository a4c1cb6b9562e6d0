"""The matrix-vector products of one decoding step: PyTorch (MKL) against numpy (OpenBLAS), same weights.

    python benchmarks/gemv.py [--threads 1 2] [--steps 300] [--smoke]

An untraced decoder step at batch 1 multiplies one row by, per layer, W_Q, W_K, W_V, W_O of the
self-attention, W_Q and W_O of the cross-attention, W_1 and W_2, and then by the output projection:
~18.5 MB of float32 weights for d_model 256, 3 layers, FFN 1024, vocab 8000 (the bundled model's and
benchmarks/decode.py's shape). This script streams random weights of those shapes in that order, as
F.linear (PyTorch's MKL) and as numpy's ``W @ x`` (OpenBLAS), and prints the median ms per step, the
effective GB/s and the largest difference between the two results. On this machine's AMD CPU MKL is
the slower one, which is why ``model.transformer.linear`` sends single rows to numpy. ``--threads`` sets
torch's thread count; numpy's BLAS stays on one thread, as ``model.checkpoint.use_threads`` keeps it
(its threads and torch's would compete for the same cores). Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FULL = dict(d_model=256, layers=3, ffn=1024, vocab=8000, steps=300)
SMOKE = dict(d_model=32, layers=1, ffn=64, vocab=300, steps=5)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=None, help="timed steps per figure (default 300)")
    p.add_argument("--smoke", action="store_true", help="tiny shapes, 5 steps: checks the script end to end")
    a = p.parse_args(argv)
    size = SMOKE if a.smoke else FULL
    steps = a.steps or size["steps"]

    import numpy as np
    import torch
    import torch.nn.functional as F

    from model.checkpoint import use_threads

    D, d_ff = size["d_model"], size["ffn"]
    shapes = [(D, D)] * 6 + [(d_ff, D), (D, d_ff)]
    shapes = shapes * size["layers"] + [(size["vocab"], D)]
    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(s, generator=g) * 0.05 for s in shapes]
    rows = {n: torch.randn(n, generator=g) for n in (D, d_ff)}
    mb = sum(w.numel() for w in weights) * 4 / 2**20

    def with_torch():
        return [F.linear(rows[W.shape[1]][None], W)[0] for W in weights]

    def with_numpy():
        return [torch.from_numpy(W.numpy() @ rows[W.shape[1]].numpy()) for W in weights]

    diff = max(float((a - b).abs().max()) for a, b in zip(with_torch(), with_numpy()))
    print(f"\nOne decoding step's matrix-vector products: {len(shapes)} weights, {mb:.1f} MB float32, one row; "
          f"median of {steps} steps, libraries alternating\n")  # fmt: skip
    head = f"{'threads':>7}  {'library':<33}{'ms/step':>9}{'GB/s':>8}"
    print(head)
    print("-" * len(head))
    ratios = {}
    for n in a.threads:
        use_threads(n)
        times: dict[str, list[float]] = {"PyTorch F.linear (MKL)": [], "numpy W @ x (OpenBLAS, 1 thread)": []}
        for fn in (with_torch, with_numpy):
            for _ in range(5):
                fn()
        for _ in range(steps):  # alternate, so a slow minute of a shared machine hits both
            for name, fn in zip(times, (with_torch, with_numpy)):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        med = {name: statistics.median(ts) for name, ts in times.items()}
        for name, s in med.items():
            print(f"{n:>7}  {name:<33}{s * 1000:>9.3f}{mb / 1024 / s:>8.1f}")
        ratios[n] = med["PyTorch F.linear (MKL)"] / med["numpy W @ x (OpenBLAS, 1 thread)"]
    print(f"\nlargest difference between the two results: {diff:.2e} ({np.finfo(np.float32).eps:.1e} = float32 eps)")
    for n, r in ratios.items():
        print(f"[threads {n}] numpy (1 thread) is {r:.2f}x as fast as PyTorch ({n} threads) for one row")


if __name__ == "__main__":
    main()
