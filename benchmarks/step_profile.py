"""Where an untraced beam-search step spends its time: each operation timed in place, and hot.

    python benchmarks/step_profile.py [--model DIR] [--limit 100] [--threads 2] [--beam 5] [--pyinstrument]
                                      [--data DIR] [--smoke]

Decodes the first ``--limit`` Multi30k test_2016_flickr sentences with beam search, as
benchmarks/engines.py times "ours, untraced" (batch 1, one LeanDecoder, threads shared as the CLI
shares them), with a timer around each operation of every ``model.decode.lean.LeanDecoder`` step: the
weight products (fused Q/K/V, W_O, W_1, W_2, the output projection), softmax(QKᵀ/√d_k)·V, the
cross-attention (its W_Q and W_O folded into the source's K, V by LeanDecoder.start), Add & Norm,
the activation, and what is left of the step (embedding lookup, cache writes, Python). The encoder,
the cross-attention K, V of the source (and their folding) and the beam bookkeeping (log-softmax,
top-k, hypotheses) are timed outside the steps. Then each product is timed again
alone, called over and over on the same input ("hot": its weights stay in the core's cache), and
the table shows how much slower it runs in place, where every step streams all the decoder's
weights through the cache again. The timers cost ~1 µs each, so the total here is a little above an
untimed run's; engines.py has the untimed figures and the CTranslate2 comparison.

Untraced decodes run each step as one compiled function (model.decode.fused), whose operations cannot be timed
apart; the operations timed here are those of the numpy step, the same arithmetic as the step of a
recorded decode. The header gives both steps' untimed figures.

``--pyinstrument`` also prints pyinstrument's call-tree profile of the same decoding, untimed by
us (requirements-dev.txt). ``--smoke`` runs a tiny random model on random ids. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

SPLIT = "test_2016_flickr"
PRODUCTS = {  # LeanDecoder layer key -> row label
    "qkv": "self-attention fused W_Q|W_K|W_V",
    "o": "self-attention W_O",
    "w1": "FFN W_1",
    "w2": "FFN W_2",
}
OTHER = {
    "out": "output projection (tied embedding)",
    "attention": "self-attention softmax(QKᵀ/√d_k)·V",
    "cross": "cross-attention, folded into the source",
    "norm": "Add & Norm (x3 per layer)",
    "act": "FFN activation",
    "step_rest": "rest of the step (embed, cache writes, Python)",
}
OUTSIDE = {
    "encode": "encoder (once per sentence)",
    "start": "cross-attention K, V of the source (once)",
    "bookkeeping": "beam bookkeeping (log-softmax, top-k, cache reorder)",
}


class Clock:
    """Exclusive time per label: a timed call's children are subtracted from it, so the labels add up."""

    def __init__(self):
        self.total = defaultdict(float)
        self.calls = defaultdict(int)
        self.stack: list[float] = []  # time spent in children of each open call

    def wrap(self, label: str, fn):
        def timed(*args, **kwargs):
            self.stack.append(0.0)
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            dt = time.perf_counter() - t0
            children = self.stack.pop()
            self.total[label] += dt - children
            self.calls[label] += 1
            if self.stack:
                self.stack[-1] += dt
            return out

        return timed


class Timed:
    """A LeanDecoder _Linear behind the clock; the same product, attributes passed through."""

    def __init__(self, linear, clock: Clock, label: str):
        self.linear, self.call = linear, clock.wrap(label, linear)

    def __call__(self, x):
        return self.call(x)


def instrument(lean, clock: Clock) -> None:
    """Put the clock around each operation of ``lean`` (this script's own instance; the model is untouched), whose
    steps run in numpy."""
    lean.compiled = None
    for w in lean.layers:
        for key in PRODUCTS:
            w[key] = Timed(w[key], clock, key)
    lean.out = Timed(lean.out, clock, "out")
    lean._attention = clock.wrap("attention", lean._attention)
    lean._cross_folded = clock.wrap("cross", lean._cross_folded)
    lean._norm = clock.wrap("norm", lean._norm)
    lean._act = clock.wrap("act", lean._act)
    lean.step = clock.wrap("step_rest", lean.step)
    lean.start = clock.wrap("start", lean.start)


def load(a):
    """(model, source id lists, description)."""
    import torch

    if a.smoke:
        from model.testing import make_model

        model = make_model(300, max_len=32)  # the tests' tiny seeded model
        cfg = model.cfg
        g = torch.Generator().manual_seed(1)
        srcs = [torch.randint(4, cfg.vocab_size, (n,), generator=g).tolist() + [cfg.eos_id] for n in (5, 9, 7, 12)]
        return model, srcs, "random model (smoke), 4 random sources"
    from model.decode.decoding import prepare_ids
    from model.io.checkpoint import ModelDirError, load_model_dir
    from model.train.data import default_data_dir, load_multi30k_test

    try:
        loaded = load_model_dir(a.model)
    except ModelDirError as e:
        sys.exit(f"error: {e}")
    try:
        texts = [en for en, _ in load_multi30k_test(a.data or default_data_dir(), SPLIT)[: a.limit]]
    except FileNotFoundError as e:
        sys.exit(f"error: Multi30k {SPLIT} not found ({e}); give the corpus directory with --data")
    cfg = loaded.model.cfg
    srcs = [prepare_ids(loaded.tokenizer.encode(t), cfg.eos_id, cfg.max_len) for t in texts]
    return loaded.model, srcs, f"{len(srcs)} Multi30k {SPLIT} sentences"


def decode_all(model, lean, srcs, opts, clock: Clock | None, encoder=None) -> float:
    """Beam-search every source as model.decode.decoding.decode does, with the encoder (``encoder``'s, else
    ``lean``'s) and
    the search timed apart."""
    import numpy as np
    import torch

    from model.decode.decoding import beam_search, search

    encode = (encoder or lean).encode
    encode = encode if clock is None else clock.wrap("encode", encode)
    search = search if clock is None else clock.wrap("bookkeeping", search)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for s in srcs:
            memory, src_mask = encode(np.array([s]))
            search(lean, lean.start(memory, src_mask), beam_search(model.cfg, opts), model.cfg, opts)
    return time.perf_counter() - t0


def hot_us(linear, rows: int, repeats: int) -> float:
    """Median µs of one product called again and again on the same input."""
    import numpy as np

    x = np.random.default_rng(0).standard_normal((rows, linear.W.shape[0]), dtype=np.float32)
    for _ in range(10):
        linear(x)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        linear(x)
        ts.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(ts)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=None, help="model directory (default: assets/models/en-fr)")
    p.add_argument("--limit", type=int, default=100, help=f"first N sentences of Multi30k {SPLIT}")
    p.add_argument("--threads", type=int, default=2, help="threads, shared as the CLI shares them (default 2)")
    p.add_argument("--beam", type=int, default=5, help="beam width (default 5)")
    p.add_argument("--data", type=Path, default=None, help="corpus directory (default <repo>/../shared/data)")
    p.add_argument("--pyinstrument", action="store_true", help="also print pyinstrument's profile of the decoding")
    p.add_argument("--smoke", action="store_true", help="tiny random model on random ids: checks the script")
    a = p.parse_args(argv)
    if a.beam < 2:
        p.error("--beam must be at least 2 (this profiles beam-search steps)")

    from model.decode.decoding import DecodeOptions
    from model.decode.lean import LeanDecoder
    from model.io.checkpoint import use_threads

    use_threads(a.threads)
    model, srcs, what = load(a)
    cfg = model.cfg
    opts = DecodeOptions(strategy="beam", beam=a.beam)
    compiled, in_numpy = LeanDecoder(model, rows=a.beam), LeanDecoder(model, rows=a.beam)
    in_numpy.compiled = None
    untimed = {}
    for name, lean in (("compiled", compiled), ("numpy", in_numpy)):
        decode_all(model, lean, srcs[:3], opts, None)  # warm-up (and the compiled step's compilation), untimed
        untimed[name] = decode_all(model, lean, srcs, opts, None)

    lean, clock = LeanDecoder(model, rows=a.beam), Clock()
    instrument(lean, clock)
    # the encoder of an untimed copy: it calls the _norm and _act timed as the steps' own
    timed = decode_all(model, lean, srcs, opts, clock, LeanDecoder(model, rows=a.beam))
    n_steps = clock.calls["step_rest"]
    per_step = {k: 1e6 * v / n_steps for k, v in clock.total.items()}
    step_us = sum(per_step[k] for k in (*PRODUCTS, *OTHER))
    mb = 4 * (sum(w[k].linear.W.size for w in lean.layers for k in PRODUCTS) + lean.out.linear.W.size) / 2**20

    print(
        f"\n{what}, beam {a.beam}, {a.threads} thread(s); d_model {cfg.d_model}, "
        f"{cfg.n_decoder_layers} decoder layers, FFN {cfg.d_ff}, vocab {cfg.vocab_size}: "
        f"{mb:.1f} MB of float32 weights read per step"
    )
    print(
        f"{n_steps / len(srcs):.1f} decoder steps per sentence; ms per sentence untimed: "
        f"{1000 * untimed['compiled'] / len(srcs):.1f} with the compiled step (model.decode.fused), "
        f"{1000 * untimed['numpy'] / len(srcs):.1f} with the numpy step; "
        f"{1000 * timed / len(srcs):.1f} with the numpy step and the timers, profiled below\n"
    )
    heads = ("calls", 6), ("µs/step", 10), ("share", 8), ("µs/call", 10), ("hot µs", 9), ("in place/hot", 14)
    print(f"{'per decoder step':<52}" + "".join(f"{h:>{w}}" for h, w in heads))
    for key, label in {**PRODUCTS, **OTHER}.items():
        calls = clock.calls[key] / n_steps
        row = f"{label:<52}{calls:>6.1f}{per_step[key]:>10.1f}{per_step[key] / step_us:>8.0%}"
        if key in PRODUCTS or key == "out":
            linear = lean.out.linear if key == "out" else lean.layers[0][key].linear
            hot = hot_us(linear, a.beam, 200)
            row += f"{per_step[key] / calls:>10.1f}{hot:>9.1f}{per_step[key] / calls / hot:>13.1f}x"
        print(row)
    print(f"{'step total':<52}{'':>6}{step_us:>10.1f}{1:>8.0%}")
    print(f"\n{'per sentence':<52}{'ms':>10}")
    for key, label in OUTSIDE.items():
        print(f"{label:<52}{1000 * clock.total[key] / len(srcs):>10.2f}")
    print(f"{'decoder steps':<52}{step_us * n_steps / len(srcs) / 1000:>10.2f}")
    products = sum(per_step[k] for k in (*PRODUCTS, "out"))
    print(
        f"\nverdict: weight products take {products / step_us:.0%} of a step ({products:.0f} of {step_us:.0f} µs, "
        f"{mb / 1024 / (products * 1e-6):.1f} GB/s of weights)"
    )

    if a.pyinstrument:
        from pyinstrument import Profiler

        lean = LeanDecoder(model, rows=a.beam)
        with Profiler(interval=0.0005) as prof:
            decode_all(model, lean, srcs, opts, None)
        print(prof.output_text(unicode=True, color=False, show_all=False, time="percent_of_total"))


if __name__ == "__main__":
    main()
