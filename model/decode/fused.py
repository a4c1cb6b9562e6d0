"""An untraced decoding step as one compiled function (numba): the same arithmetic as ``LeanDecoder.step`` without
its record, for decodes nobody looks inside (the CLI, BLEU and validation, the benchmarks).

Through numpy a step is ~25 products and ~150 small operations of a microsecond or more each, plus the Python
between them: ~0.4 ms of a ~1.1 ms greedy step for this project's model, the products being the rest. Compiled,
the small operations cost what their arithmetic costs. The products are loops too: each row of weights is read
once for up to five rows of the step (a beam's five), their sums held in registers, which streams the weights as
fast as BLAS for one row and faster than MKL for five (benchmarks/gemv.py). Compiled on first use and
cached beside this file, or in the user's cache directory (~3 s once; NUMBA_CACHE_DIR moves the cache; with neither
writable, compiled anew in each process).

Sums run in another order than numpy's (``reassoc``), so numbers agree to float rounding, not bit for bit:
tests/model/test_fused.py checks the logits and the decodes against the numpy step. No ``nnan``/``ninf``: masked
scores are −inf.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

_FAST = {"reassoc", "contract", "nsz", "arcp"}  # vectorised sums and fused multiply-adds; −inf stays −inf
ACTIVATION_CODES = {"relu": 0, "silu": 1, "swish": 1, "gelu": 2}  # every one of ModelConfig's


def _jit(fn):
    try:
        return nb.njit(fastmath=_FAST, cache=True, nogil=True)(fn)
    except RuntimeError:  # no writable cache directory (a read-only install, no home): compiled anew in each process
        return nb.njit(fastmath=_FAST, nogil=True)(fn)


@_jit
def _affine(x, W, b, out):
    """out (R, N) = x (R, K) @ Wᵀ + b, with W (N, K) as torch stores it. One row: a dot product per column. Several:
    five rows and two columns at a time, ten sums held in registers, so a weight is read once for five rows (a
    short group repeats its last row and a last odd column itself, and drops what they computed twice)."""
    R, K = x.shape
    N = W.shape[0]
    if R == 1:
        x0 = x[0]
        for j in range(N):
            w = W[j]
            s = np.float32(0.0)
            for k in range(K):
                s += x0[k] * w[k]
            out[0, j] = s + b[j]
        return
    for r in range(0, R, 5):
        x0, x1, x2 = x[r], x[min(r + 1, R - 1)], x[min(r + 2, R - 1)]
        x3, x4 = x[min(r + 3, R - 1)], x[min(r + 4, R - 1)]
        n = min(5, R - r)
        for j in range(0, N, 2):
            j2 = min(j + 1, N - 1)
            w, v = W[j], W[j2]
            s0 = s1 = s2 = s3 = s4 = t0 = t1 = t2 = t3 = t4 = np.float32(0.0)
            for k in range(K):
                wk, vk = w[k], v[k]
                a0, a1, a2, a3, a4 = x0[k], x1[k], x2[k], x3[k], x4[k]
                s0 += a0 * wk
                s1 += a1 * wk
                s2 += a2 * wk
                s3 += a3 * wk
                s4 += a4 * wk
                t0 += a0 * vk
                t1 += a1 * vk
                t2 += a2 * vk
                t3 += a3 * vk
                t4 += a4 * vk
            sums_j = (s0, s1, s2, s3, s4)
            sums_j2 = (t0, t1, t2, t3, t4)
            for q in range(n):
                out[r + q, j] = sums_j[q] + b[j]
                out[r + q, j2] = sums_j2[q] + b[j2]


@_jit
def _add_norm(x, g, b, eps, out):
    """out = LayerNorm(x) row by row (x already holds the residual sum)."""
    R, D = x.shape
    for r in range(R):
        mean = np.float32(0.0)
        for d in range(D):
            mean += x[r, d]
        mean /= D
        var = np.float32(0.0)
        for d in range(D):
            c = x[r, d] - mean
            var += c * c
        inv = np.float32(1.0) / np.sqrt(var / D + eps)
        for d in range(D):
            out[r, d] = (x[r, d] - mean) * inv * g[d] + b[d]


@_jit
def _softmax(s, n):
    """softmax of s[:n] in place."""
    m = s[0]
    for j in range(1, n):
        m = max(m, s[j])
    total = np.float32(0.0)
    for j in range(n):
        e = np.exp(s[j] - m)
        s[j] = e
        total += e
    for j in range(n):
        s[j] /= total


@_jit
def _attend(q, K, V, n, mask, scores, out):
    """out (d_k,) = softmax(q Kᵀ + mask) V over the first n keys: K, V (≥ n, d_k), mask (≥ n,); scores: scratch."""
    d_k = q.shape[0]
    for j in range(n):
        s = np.float32(0.0)
        for d in range(d_k):
            s += q[d] * K[j, d]
        scores[j] = s + mask[j]
    _softmax(scores, n)
    out[:] = 0.0
    for j in range(n):
        a = scores[j]
        for d in range(d_k):
            out[d] += a * V[j, d]


@_jit
def activate(h: np.ndarray, code: int) -> None:
    """The FFN's activation in place (its ACTIVATION_CODES code)."""
    R, F = h.shape
    for r in range(R):
        for j in range(F):
            v = h[r, j]
            if code == 0:
                h[r, j] = max(v, np.float32(0.0))
            elif code == 1:
                h[r, j] = v / (np.float32(1.0) + np.exp(-v))
            else:
                h[r, j] = np.float32(0.5) * v * (np.float32(1.0) + np.float32(math.erf(v / math.sqrt(2.0))))


class StepWeights(NamedTuple):
    """What the compiled step reads of the model (LeanDecoder.compiled builds it once). W, b: per layer, the products'
    weights (out, in) and biases in the order W_QKV (Q scaled by 1/sqrt(d_k)), W_O, cross W_Q (scaled), cross W_O,
    W_1, W_2, then the output projection; norms (layers, 3, 2, D): each Add & Norm's gain and bias; act: the FFN's
    ACTIVATION_CODES code."""

    embed: np.ndarray  # (V, D), times sqrt(D)
    pe: np.ndarray  # (max_len, D)
    W: tuple[np.ndarray, ...]
    b: tuple[np.ndarray, ...]
    norms: np.ndarray
    eps: np.float32
    act: int


class StepCache(NamedTuple):
    """What the compiled step reads and writes of a LeanCache: the K, V cache ``KV`` (layers, R, 2, H, max_len, d_k);
    the cross-attention's ``M`` (layers, R or 1, H·S, D), ``c`` (layers, R or 1, H·S) and ``N``, given as Nᵀ (layers,
    R or 1, D, H·S), when ``folded`` (LeanDecoder.start), else ``cross`` (layers, R or 1, 2, H, S, d_k); ``mask``
    (R or 1, S) is added to its scores."""

    KV: np.ndarray
    folded: bool
    M: np.ndarray
    c: np.ndarray
    N: np.ndarray
    cross: np.ndarray
    mask: np.ndarray


# Long on purpose: one numba-compiled decoding step, every layer top to bottom in one compiled function (lean.py
# holds the same step in numpy, function by function, with its record).
@_jit
def step(tokens: np.ndarray, t: int, weights: StepWeights, cache: StepCache, logits: np.ndarray) -> None:
    """One untraced step for rows fed ``tokens`` (R,) at position ``t``: the logits (R, V) written into ``logits``, the
    K, V of position t into ``cache.KV``. ``weights``: a StepWeights; ``cache``: a StepCache."""
    embed, pe, W, b, norms, eps, act = weights
    KV, folded, M, c, N, cross, mask = cache
    R = tokens.shape[0]
    L, _, _, H, _, d_k = KV.shape
    D = H * d_k
    y = np.empty((R, D), np.float32)
    for r in range(R):
        for d in range(D):
            y[r, d] = embed[tokens[r], d] + pe[t, d]
    qkv = np.empty((R, 3 * D), np.float32)
    ctx = np.empty((R, D), np.float32)
    tmp = np.empty((R, D), np.float32)
    q = np.empty((R, D), np.float32)
    S = mask.shape[1]
    scores = np.empty(max(t + 1, S), np.float32)
    unmasked = np.zeros(t + 1, np.float32)  # the causal mask of the newest position: nothing masked
    sc = np.empty((R, H * S), np.float32)
    hidden = np.empty((R, W[4].shape[0]), np.float32)
    for i in range(L):
        Wqkv, Wo, Wcq, Wco, W1, W2 = W[6 * i], W[6 * i + 1], W[6 * i + 2], W[6 * i + 3], W[6 * i + 4], W[6 * i + 5]
        bqkv, bo, bcq, bco, b1, b2 = b[6 * i], b[6 * i + 1], b[6 * i + 2], b[6 * i + 3], b[6 * i + 4], b[6 * i + 5]
        # masked self-attention: the newest position sees every cached one
        _affine(y, Wqkv, bqkv, qkv)  # (R, 3D): Q / sqrt(d_k), K, V
        for r in range(R):
            for h in range(H):
                for d in range(d_k):
                    KV[i, r, 0, h, t, d] = qkv[r, D + h * d_k + d]
                    KV[i, r, 1, h, t, d] = qkv[r, 2 * D + h * d_k + d]
                hd = slice(h * d_k, (h + 1) * d_k)
                _attend(qkv[r, hd], KV[i, r, 0, h], KV[i, r, 1, h], t + 1, unmasked, scores, ctx[r, hd])
        _affine(ctx, Wo, bo, tmp)
        tmp += y
        _add_norm(tmp, norms[i, 0, 0], norms[i, 0, 1], eps, y)
        # cross-attention over the source
        if folded:  # the scores y Mᵀ + c and the output α N: products over the source's H·S positions
            if M.shape[1] == 1:
                _affine(y, M[i, 0], c[i, 0], sc)
            else:
                for r in range(R):
                    for hs in range(H * S):
                        s = c[i, r, hs]
                        for d in range(D):
                            s += y[r, d] * M[i, r, hs, d]
                        sc[r, hs] = s
            for r in range(R):
                rm = 0 if mask.shape[0] == 1 else r
                for hs in range(H * S):
                    sc[r, hs] += mask[rm, hs % S]
                for h in range(H):
                    _softmax(sc[r, h * S : (h + 1) * S], S)
            if N.shape[1] == 1:
                _affine(sc, N[i, 0], bco, tmp)
            else:
                for r in range(R):
                    for d in range(D):
                        s = bco[d]
                        for hs in range(H * S):
                            s += sc[r, hs] * N[i, r, d, hs]
                        tmp[r, d] = s
            tmp += y
        else:
            _affine(y, Wcq, bcq, q)
            for r in range(R):
                rm = 0 if mask.shape[0] == 1 else r
                rc = 0 if cross.shape[1] == 1 else r
                for h in range(H):
                    hd = slice(h * d_k, (h + 1) * d_k)
                    _attend(q[r, hd], cross[i, rc, 0, h], cross[i, rc, 1, h], S, mask[rm], scores, ctx[r, hd])
            _affine(ctx, Wco, bco, tmp)
            tmp += y
        _add_norm(tmp, norms[i, 1, 0], norms[i, 1, 1], eps, y)
        # position-wise feed-forward
        _affine(y, W1, b1, hidden)
        activate(hidden, act)
        _affine(hidden, W2, b2, tmp)
        tmp += y
        _add_norm(tmp, norms[i, 2, 0], norms[i, 2, 1], eps, y)
    _affine(y, W[6 * L], b[6 * L], logits)


@_jit
def best_continuations(logp: np.ndarray, running: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The n best of the R·V continuations of (R, V) log-probabilities by running[r] + logp[r, v], best first (ties:
    lower row, then lower token): their scores, rows and tokens. A row's best n are at or above the n-th largest of
    the maxima of its groups of 16 tokens (j, j + V/16, ...; each maximum is one of its tokens): only the tokens of
    groups whose maximum reaches it, and the last V mod 16, are looked at."""
    R, V = logp.shape
    g = 16 if V >= 16 * n else 1  # tokens per group: 16 leaves ~n to 2n tokens a row to sort
    width = V // g
    found = np.empty(R * V, np.int64)  # row * V + token
    count = 0
    maxima = np.empty(width, np.float32)
    for r in range(R):
        row = logp[r]
        if width < n:  # too few groups for a bound: every token
            for v in range(V):
                found[count] = r * V + v
                count += 1
            continue
        maxima[:] = row[:width]
        for q in range(1, g):
            for j in range(width):
                x = row[q * width + j]
                maxima[j] = x if x > maxima[j] else maxima[j]
        bound = np.partition(maxima, width - n)[width - n]
        for j in range(width):
            if maxima[j] >= bound:
                for q in range(g):
                    if row[q * width + j] >= bound:
                        found[count] = r * V + q * width + j
                        count += 1
        for v in range(width * g, V):
            if row[v] >= bound:
                found[count] = r * V + v
                count += 1
    found = np.sort(found[:count])  # row by row, tokens ascending: the order ties keep
    scores = np.empty(count, np.float32)
    for i in range(count):
        r, v = divmod(found[i], V)
        scores[i] = logp[r, v] + running[r]
    best = np.argsort(-scores, kind="mergesort")[:n]  # stable
    return scores[best], found[best] // V, found[best] % V


@_jit
def _copy_row(KV, dest, src, t):
    L, _, two, H, _, d_k = KV.shape
    for i in range(L):
        for k in range(two):
            for h in range(H):
                a, b = KV[i, dest, k, h], KV[i, src, k, h]
                for j in range(t):
                    for d in range(d_k):
                        a[j, d] = b[j, d]


@_jit
def reorder(KV: np.ndarray, rows: np.ndarray, t: int) -> None:
    """KV[:, r, :, :, :t] = KV[:, rows[r], :, :, :t] for every row r, in place (a beam's reorder). Only the rows that
    take another's place are written, each once, after every row that reads it has (a cycle of rows, which a beam
    rarely makes, goes through copies)."""
    R = len(rows)
    pending = rows != np.arange(R)
    readers = np.zeros(R, np.int64)  # pending rows still to read each pending row
    for d in range(R):
        if pending[d] and pending[rows[d]]:
            readers[rows[d]] += 1
    progress = True
    while progress:
        progress = False
        for d in range(R):
            if pending[d] and readers[d] == 0:
                _copy_row(KV, d, rows[d], t)
                pending[d] = False
                if pending[rows[d]]:
                    readers[rows[d]] -= 1
                progress = True
    cycle = np.flatnonzero(pending)
    if len(cycle):
        copies = np.empty((len(cycle), KV.shape[0], KV.shape[2], KV.shape[3], t, KV.shape[5]), np.float32)
        for n in range(len(cycle)):
            copies[n] = KV[:, rows[cycle[n]], :, :, :t]
        for n in range(len(cycle)):
            KV[:, cycle[n], :, :, :t] = copies[n]


@_jit
def add_norm(x: np.ndarray, f: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float, out: np.ndarray) -> None:
    """out = LayerNorm(x + f) row by row (x, f, out: (R, D)); out may be x."""
    f += x
    _add_norm(f, g, b, eps, out)


@_jit
def encoder_attention(qkv: np.ndarray, B: int, H: int, mask: np.ndarray, ctx: np.ndarray) -> None:
    """softmax(Q Kᵀ + mask) V of every head of the B sentences whose positions are the rows of ``qkv`` (B·S, 3D): Q
    (scaled by 1/sqrt(d_k)), K, V side by side, as the fused W_QKV gives them. ``mask`` (B or 1, S) is added to the
    scores; the heads' contexts are written side by side into ``ctx`` (B·S, D), as W_O reads them. Its own loops,
    not _attend's: a head's K, V are strided columns of qkv, over which _attend ran 4x slower (not vectorised)."""
    BS, D3 = qkv.shape
    S, D = BS // B, D3 // 3
    d_k = D // H
    scores = np.empty(S, np.float32)
    for n in range(B):
        rm = 0 if mask.shape[0] == 1 else n
        for h in range(H):
            q0, k0, v0 = h * d_k, D + h * d_k, 2 * D + h * d_k
            for i in range(S):
                qi = qkv[n * S + i, q0 : q0 + d_k]
                for j in range(S):
                    kj = qkv[n * S + j, k0 : k0 + d_k]
                    s = np.float32(0.0)
                    for d in range(d_k):
                        s += qi[d] * kj[d]
                    scores[j] = s + mask[rm, j]
                _softmax(scores, S)
                c = ctx[n * S + i, q0 : q0 + d_k]
                c[:] = 0.0
                for j in range(S):
                    a = scores[j]
                    vj = qkv[n * S + j, v0 : v0 + d_k]
                    for d in range(d_k):
                        c[d] += a * vj[d]
