"""An untraced decoding step as one compiled function (numba): the same arithmetic as ``LeanDecoder.step`` without
its record, for decodes nobody looks inside (the CLI, BLEU, the what-if re-decodes).

Through numpy a step is ~25 products and ~150 small operations of a microsecond or more each, plus the Python
between them: ~0.4 ms of a ~1.1 ms greedy step for this project's model, the products being the rest. Compiled,
the small operations cost what their arithmetic costs. The products are loops too: one row of weights is read
once for every row of the step (a beam's five), in blocks of columns that stay in L1, which streams the weights
as fast as numpy's BLAS for one row and faster for five (benchmarks/step_profile.py). Compiled on first use and
cached beside this file (~seconds once; NUMBA_CACHE_DIR moves the cache).

Sums run in another order than numpy's (``reassoc``), so numbers agree to float rounding, not bit for bit:
tests/test_fused.py checks the logits and the decodes against the numpy step. No ``nnan``/``ninf``: masked
scores are −inf.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

_FAST = {"reassoc", "contract", "nsz", "arcp"}  # vectorised sums and fused multiply-adds; −inf stays −inf
ACTIVATIONS = {"relu": 0, "silu": 1, "swish": 1, "gelu": 2}


def _jit(fn):
    return nb.njit(fastmath=_FAST, cache=True, nogil=True)(fn)


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
            s = (s0, s1, s2, s3, s4)
            t = (t0, t1, t2, t3, t4)
            for q in range(n):
                out[r + q, j] = s[q] + b[j]
                out[r + q, j2] = t[q] + b[j2]


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
def _act(h, code):
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


@_jit
def step(tokens, t, embed, pe, W, b, norms, eps, act, KV, folded, M, c, N, cross, mask, logits):
    """One untraced step for rows fed ``tokens`` (R,) at position ``t``: the logits (R, V) written into ``logits``, the
    K, V of position t into the cache ``KV`` (layers, R, 2, H, max_len, d_k).

    W, b: per layer, the products' weights (in, out) and biases in the order W_QKV, W_O, cross W_Q, cross W_O, W_1,
    W_2, then the output projection; norms (layers, 3, 2, D): each Add & Norm's gain and bias. The cross-attention
    reads ``M``, ``c``, ``N`` (layers, R or 1, H·S, ·) when ``folded`` (LeanDecoder.start), else ``cross`` (layers,
    R or 1, 2, H, S, d_k); ``mask`` (R or 1, S) is added to its scores."""
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
    scores = np.empty(max(t + 1, H * S), np.float32)
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
                for j in range(t + 1):
                    s = np.float32(0.0)
                    for d in range(d_k):
                        s += qkv[r, h * d_k + d] * KV[i, r, 0, h, j, d]
                    scores[j] = s
                _softmax(scores, t + 1)
                for d in range(d_k):
                    ctx[r, h * d_k + d] = 0.0
                for j in range(t + 1):
                    a = scores[j]
                    for d in range(d_k):
                        ctx[r, h * d_k + d] += a * KV[i, r, 1, h, j, d]
        _affine(ctx, Wo, bo, tmp)
        tmp += y
        _add_norm(tmp, norms[i, 0, 0], norms[i, 0, 1], eps, y)
        # cross-attention over the source
        for r in range(R):
            rm = 0 if mask.shape[0] == 1 else r
            if folded:
                rf = 0 if M.shape[1] == 1 else r
                for hs in range(H * S):
                    s = c[i, rf, hs]
                    for d in range(D):
                        s += y[r, d] * M[i, rf, hs, d]
                    scores[hs] = s + mask[rm, hs % S]
                for h in range(H):
                    _softmax(scores[h * S : (h + 1) * S], S)
                for d in range(D):
                    tmp[r, d] = bco[d] + y[r, d]
                for hs in range(H * S):
                    a = scores[hs]
                    for d in range(D):
                        tmp[r, d] += a * N[i, rf, hs, d]
        if not folded:
            _affine(y, Wcq, bcq, q)
            for r in range(R):
                rm = 0 if mask.shape[0] == 1 else r
                rc = 0 if cross.shape[1] == 1 else r
                for h in range(H):
                    for j in range(S):
                        s = np.float32(0.0)
                        for d in range(d_k):
                            s += q[r, h * d_k + d] * cross[i, rc, 0, h, j, d]
                        scores[j] = s + mask[rm, j]
                    _softmax(scores, S)
                    for d in range(d_k):
                        ctx[r, h * d_k + d] = 0.0
                    for j in range(S):
                        a = scores[j]
                        for d in range(d_k):
                            ctx[r, h * d_k + d] += a * cross[i, rc, 1, h, j, d]
            _affine(ctx, Wco, bco, tmp)
            tmp += y
        _add_norm(tmp, norms[i, 1, 0], norms[i, 1, 1], eps, y)
        # position-wise feed-forward
        _affine(y, W1, b1, hidden)
        _act(hidden, act)
        _affine(hidden, W2, b2, tmp)
        tmp += y
        _add_norm(tmp, norms[i, 2, 0], norms[i, 2, 1], eps, y)
    _affine(y, W[6 * L], b[6 * L], logits)
