"""The products of one decoding step: PyTorch's MKL, numpy's OpenBLAS, oneDNN with prepacked weights, and ours compiled.

    python benchmarks/gemv.py [--threads 1 2] [--rows 1 5] [--steps 200] [--smoke]

An untraced decoder step multiplies R rows (1 for greedy decoding, k for a beam of k) by, per layer,
W_Q, W_K, W_V, W_O of the self-attention, W_Q and W_O of the cross-attention, W_1 and W_2, and then by
the output projection: ~18.5 MB of float32 weights for d_model 256, 3 layers, FFN 1024, vocab 8000 (the
bundled model's and benchmarks/decode.py's shape). This script streams random weights of those shapes
in that order four ways and prints the median ms per step, the effective GB/s and the largest
difference from F.linear:

- ``F.linear`` (PyTorch's MKL), what the modules use;
- numpy's ``W @ x`` per row (OpenBLAS on one thread, as its threads and torch's would compete for
  the same cores); ``model.decode.lean.LeanDecoder`` multiplies a single row this way, by the transposed,
  (in, out) layout, which measured faster still;
- oneDNN with weights prepacked once (``torch.ops.mkldnn``), what ``model.decode.lean.LeanDecoder`` uses for
  several rows of a recorded step elsewhere than on an Intel CPU;
- the compiled products of the untraced step (``model.decode.fused``, numba): a dot product per weight row for one row,
  five rows and two weight rows at a time for several.

On this machine's AMD CPU MKL is the slowest of the three for these shapes. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

FULL = dict(d_model=256, layers=3, ffn=1024, vocab=8000, steps=200)
SMOKE = dict(d_model=32, layers=1, ffn=64, vocab=300, steps=5)
METHODS = (
    "PyTorch F.linear (MKL)",
    "numpy W @ x per row (OpenBLAS)",
    "oneDNN, prepacked weights",
    "compiled (model.decode.fused)",
)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch thread counts")
    p.add_argument("--rows", type=int, nargs="+", default=[1, 5], help="rows per product (1 = greedy, k = beam)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per figure (default 200)")
    p.add_argument("--smoke", action="store_true", help="tiny shapes, 5 steps: checks the script end to end")
    a = p.parse_args(argv)
    size = SMOKE if a.smoke else FULL
    steps = a.steps or size["steps"]

    import numpy as np
    import torch
    import torch.nn.functional as F

    from model.decode import fused
    from model.io.checkpoint import use_threads

    D, d_ff = size["d_model"], size["ffn"]
    shapes = ([(D, D)] * 6 + [(d_ff, D), (D, d_ff)]) * size["layers"] + [(size["vocab"], D)]
    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(s, generator=g) * 0.05 for s in shapes]
    mb = sum(w.numel() for w in weights) * 4 / 2**20
    print(
        f"\nOne decoding step's products: {len(shapes)} weights, {mb:.1f} MB float32; median of {steps} steps, "
        "methods alternating\n"
    )
    head = f"{'threads':>7} {'rows':>4}  {'method':<31}{'ms/step':>9} {'GB/s':>8} {'max |diff|':>11}"
    print(head)
    print("-" * len(head))
    best = {}
    for R in a.rows:
        x = {n: torch.randn(R, n, generator=g) for n in (D, d_ff)}
        packed = [torch.ops.mkldnn._reorder_linear_weight(W, R) for W in weights]

        def with_mkl(x=x):
            return [F.linear(x[W.shape[1]], W) for W in weights]

        def with_numpy(x=x, R=R):
            out = []
            for W in weights:
                Wn, xn = W.numpy(), x[W.shape[1]].numpy()
                out.append(torch.from_numpy(np.stack([Wn @ xn[r] for r in range(R)])))
            return out

        def with_onednn(x=x, packed=packed):
            return [
                torch.ops.mkldnn._linear_pointwise(x[W.shape[1]], P, None, "none", [], "")
                for W, P in zip(weights, packed)
            ]

        def with_fused(x=x, R=R):
            out = []
            for W in weights:
                y = np.empty((R, W.shape[0]), np.float32)
                fused._affine(x[W.shape[1]].numpy(), W.numpy(), np.zeros(W.shape[0], np.float32), y)
                out.append(torch.from_numpy(y))
            return out

        fns = dict(zip(METHODS, (with_mkl, with_numpy, with_onednn, with_fused)))
        ref = with_mkl()
        diff = {m: max(float((u - v).abs().max()) for u, v in zip(fn(), ref)) for m, fn in fns.items()}
        for n in a.threads:
            use_threads(n)
            times: dict[str, list[float]] = {m: [] for m in METHODS}
            for fn in fns.values():
                for _ in range(5):
                    fn()
            for _ in range(steps):  # alternate, so a slow minute of a shared machine hits every method
                for m, fn in fns.items():
                    t0 = time.perf_counter()
                    fn()
                    times[m].append(time.perf_counter() - t0)
            med = {m: statistics.median(ts) for m, ts in times.items()}
            for m, s in med.items():
                # a space between columns, so a slow step (a busy machine) cannot run into the next column
                print(f"{n:>7} {R:>4}  {m:<31}{s * 1000:>9.3f} {mb / 1024 / s:>8.3g} {diff[m]:>11.1e}")
            best[(n, R)] = min(med, key=med.get), med
    print()
    for (n, R), (m, med) in best.items():
        print(f"[threads {n}, rows {R}] fastest: {m}, {med[METHODS[0]] / med[m]:.2f}x as fast as F.linear")


if __name__ == "__main__":
    main()
