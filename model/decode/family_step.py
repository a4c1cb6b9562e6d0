"""The untraced decoding step in numpy for every setting of ``ModelConfig``: pre- or post-norm, LayerNorm or RMSNorm,
final norms, an embedding norm, a positional table (sinusoidal or learned, with its offset) or T5's relative position
bias, biases or none, scaled or unscaled attention, heads of their own width, a gated FFN, the output scale.

``LeanDecoder`` steps the paper's post-norm models (the bundled model, Marian) with its own numpy step and its compiled
twin, recorded or not; the rest of the family steps here when nothing is recorded (the CLI, the corpus, BLEU, the
benchmarks), behind the same interface (``encode``, ``start``, ``step``, a ``lean.LeanCache``), and through its own
modules when a step is recorded (``decoding.ModuleDecoder``). A decoding step of a 57M-parameter model is its products
(~38 M multiply-adds a row); through the modules it also paid PyTorch's dispatch for every operation and a
concatenation of the K, V cache per layer and step: here the weights are laid out once ((in, out), Q/K/V fused, the
1/sqrt(d_k) folded into W_Q), K and V are written into preallocated buffers, and T5's bias is read from a table of
distances computed once. The same numbers as the modules' to float rounding (tests/model/test_family_step.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from model.core import keys
from model.core.ablation import Ablation
from model.core.transformer import ACTIVATION_FNS, Transformer, relative_bucket
from model.decode.lean import AnyArray, LeanCache, check_step, decoder_heads


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().copy()


def _norm_weights(norm) -> tuple[np.ndarray, np.ndarray | None]:
    """A norm's gain and bias (None: RMSNorm, which has none)."""
    return _np(norm.weight), None if getattr(norm, "bias", None) is None else _np(norm.bias)


class FamilyStep:
    """The decoder of any model of the family as numpy arrays, stepped without a record. ``linear`` builds a product
    x W + b from a torch weight (out, in) and bias, with the rows it usually multiplies (``lean._Linear``)."""

    def __init__(self, model: Transformer, linear):
        cfg = self.cfg = model.cfg
        self.model = model
        self.H, self.d_k, self.D = cfg.n_heads, cfg.d_k, cfg.d_model
        self.pre, self.rms = cfg.norm_position == "pre", cfg.norm_kind == "rms"
        inner = self.H * self.d_k
        q_scale = 1.0 / math.sqrt(self.d_k) if cfg.scale_attention else 1.0
        with torch.no_grad():
            self.embed = _np(model.embed.weight) * np.float32(model.tgt_embed.scale)  # (V, D)
            self.pe = _np(model.tgt_embed.pe)  # (max_len, D): the rows of positions 0.. (zeros: relative positions)
            norm = model.tgt_embed.norm
            self.embed_norm = None if norm is None else _norm_weights(norm)
            self.layers = []
            for layer in model.decoder_stack:
                sa, ca, ffn = layer.self_attn, layer.cross_attn, layer.ffn
                self.layers.append(
                    {
                        "qkv": linear(*_stacked((sa.W_Q, sa.W_K, sa.W_V), q_scale)),  # (D, 3·H·d_k)
                        "o": linear(sa.W_O.weight, sa.W_O.bias),
                        "cq": linear(*_stacked((ca.W_Q,), q_scale)),
                        "ckv": linear(*_stacked((ca.W_K, ca.W_V), 1.0)),  # on the source, once per sentence
                        "co": linear(ca.W_O.weight, ca.W_O.bias),
                        "w1": linear(*_stacked((ffn.W_1, *([] if ffn.W_3 is None else [ffn.W_3])), 1.0)),
                        "w2": linear(ffn.W_2.weight, ffn.W_2.bias),
                        "norms": [_norm_weights(n.norm) for n in (layer.norm1, layer.norm2, layer.norm3)],
                    }
                )
            self.final_norm = None if model.dec_norm is None else _norm_weights(model.dec_norm)
            self.out = linear(model.W_out * cfg.output_scale, model.final_logits_bias)  # (D, V): the scale folded in
            self.bias_by_distance = None
            if model.dec_bias is not None:  # (H, max_len): the bias of a key n positions behind its query
                n = torch.arange(cfg.max_len)
                bucket = relative_bucket(-n, False, cfg.relative_buckets, cfg.relative_max_distance)
                self.bias_by_distance = np.ascontiguousarray(_np(model.dec_bias.bias(bucket)).T)
        self.inner, self.gated, self.d_ff = inner, cfg.gated_ffn, cfg.d_ff
        self.eps = np.float32(cfg.layer_norm_eps)
        self.act = ACTIVATION_FNS[cfg.activation]

    def encode(self, src_ids: AnyArray, ablation: Ablation | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """The model's own encoder (once per sentence; a step's products are the decode's cost): memory (B, S, D)
        and the additive padding mask (B, 1, 1, S) or None, as arrays."""
        from model.core.transformer import head_masks

        with torch.inference_mode():
            memory, mask, _ = self.model.encode(torch.as_tensor(src_ids), heads=head_masks(ablation, self.cfg))
        return memory.float().cpu().numpy(), None if mask is None else mask.float().cpu().numpy()

    def start(self, memory: AnyArray, src_mask: AnyArray | None, ablation: Ablation | None = None) -> LeanCache:
        """An empty ``lean.LeanCache`` for the rows of ``memory`` (R, S, D): every layer's cross K, V projected once."""
        memory = memory if isinstance(memory, np.ndarray) else _np(memory)
        R, S, D = memory.shape
        L, H, d_k = len(self.layers), self.H, self.d_k
        cross = np.empty((L, R, 2, H, S, d_k), np.float32)
        flat = np.ascontiguousarray(memory.reshape(R * S, D))
        for i, w in enumerate(self.layers):
            cross[i] = w["ckv"](flat).reshape(R, S, 2, H, d_k).transpose(0, 2, 3, 1, 4)
        KV = np.empty((L, R, 2, H, self.cfg.max_len, d_k), np.float32)  # only positions written are read
        mask = None if src_mask is None else np.asarray(src_mask if isinstance(src_mask, np.ndarray) else _np(src_mask))
        return LeanCache(KV, cross, None, mask, heads=decoder_heads(ablation, self.cfg))

    def _norm(self, x: np.ndarray, gb) -> np.ndarray:
        """LayerNorm (x − mean) / sqrt(var + eps) · g + b, or RMSNorm x / sqrt(mean(x²) + eps) · g, per row."""
        g, b = gb
        if self.rms:
            out = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + self.eps)
        else:
            centered = x - np.mean(x, -1, keepdims=True)
            out = centered / np.sqrt(np.mean(centered * centered, -1, keepdims=True) + self.eps)
        out *= g
        if b is not None:
            out += b
        return out

    def _sublayer(self, y: np.ndarray, out: np.ndarray, gb) -> np.ndarray:
        """Add & Norm after the sublayer (post-norm), or the residual sum alone (pre-norm normed the input)."""
        out += y
        return out if self.pre else self._norm(out, gb)

    def _attend(self, Q, K, V, bias, mask, W_O, heads) -> np.ndarray:
        """softmax(Q Kᵀ (Q scaled where the model scales) + bias + mask) V, heads side by side, then W_O: (R, D)."""
        scores = Q @ K.swapaxes(-1, -2)  # (R, H, 1, Tk)
        if bias is not None:
            scores += bias
        if mask is not None:
            scores += mask
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = scores @ V  # (R, H, 1, d_k)
        if heads is not None:
            context = context * heads[0] + heads[1]
        return W_O(context.reshape(len(Q), self.inner))

    def step(self, tokens: np.ndarray | Sequence[int], cache: LeanCache) -> np.ndarray:
        """Feed each row its newest token (R,): the logits (R, V); the cache is updated in place (position t)."""
        tokens = np.asarray(tokens)
        R, t, H, d_k, inner = len(tokens), cache.t, self.H, self.d_k, self.inner
        check_step(R, cache, self.pe.shape[0])
        y = self.embed[tokens] + self.pe[t]  # (R, D)
        if self.embed_norm is not None:
            y = self._norm(y, self.embed_norm)
        # T5: the bias of keys 0..t seen from query t, the distances t..0 read backwards: (H, 1, t + 1)
        bias = None if self.bias_by_distance is None else self.bias_by_distance[:, t::-1][:, None]
        for i, w in enumerate(self.layers):
            norms = w["norms"]
            h = self._norm(y, norms[0]) if self.pre else y
            qkv = w["qkv"](h)  # (R, 3·H·d_k): Q (scaled where the model scales), K, V
            KV = cache.KV[i]  # (R, 2, H, max_len, d_k)
            KV[:, :, :, t] = qkv[:, inner:].reshape(R, 2, H, d_k)
            Q = qkv[:, :inner].reshape(R, H, 1, d_k)
            K, V = KV[:, 0, :, : t + 1], KV[:, 1, :, : t + 1]  # (R, H, t + 1, d_k) each
            a = self._attend(Q, K, V, bias, None, w["o"], _heads(cache, i, "self"))
            y = self._sublayer(y, a, norms[0])
            h = self._norm(y, norms[1]) if self.pre else y
            Q = w["cq"](h).reshape(R, H, 1, d_k)
            cross = cache.cross[i]  # (R or 1, 2, H, S, d_k)
            c = self._attend(Q, cross[:, 0], cross[:, 1], None, cache.src_mask, w["co"], _heads(cache, i, "cross"))
            y = self._sublayer(y, c, norms[1])
            h = self._norm(y, norms[2]) if self.pre else y
            y = self._sublayer(y, w["w2"](self._ffn_hidden(w["w1"](h))), norms[2])
        cache.t = t + 1
        if self.final_norm is not None:
            y = self._norm(y, self.final_norm)
        return self.out(y)  # (R, V)

    def _ffn_hidden(self, pre_act: np.ndarray) -> np.ndarray:
        """act(x W_1), or act(x W_1) ⊙ x W_3 where the FFN is gated (x W_1 and x W_3 side by side in ``pre_act``)."""
        if not self.gated:
            return self._activate(pre_act)
        return self._activate(np.ascontiguousarray(pre_act[:, : self.d_ff])) * pre_act[:, self.d_ff :]

    def _activate(self, h: np.ndarray) -> np.ndarray:
        if self.act is F.relu:
            return np.maximum(h, 0, out=h)
        return self.act(torch.from_numpy(h)).numpy()


def _heads(cache, i: int, block: str) -> Any:
    return cache.heads.get(keys.dec(i, block))


def _stacked(linears, q_scale: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The linears' weights (and biases, where they have them) stacked, the first one's times ``q_scale``."""
    W = torch.cat([m.weight for m in linears])
    n = linears[0].weight.shape[0]
    W[:n] *= q_scale
    if linears[0].bias is None:
        return W, None
    b = torch.cat([m.bias for m in linears])
    b[:n] *= q_scale
    return W, b
