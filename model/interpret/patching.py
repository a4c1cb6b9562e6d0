"""Activation patching (causal tracing, Meng et al. 2022) for the encoder-decoder, as returned values.

A clean run reads source A; a corrupted run reads source B (of A's token length) or A with Gaussian noise added to
its token embeddings (ROME's corruption: NOISE_SCALE × the standard deviation of the model's token embeddings over
the vocabulary, from a fixed generator). Both are teacher-forced on A's output, so only the source differs. The
measured quantity is the probability of A's token ``out_ids[t]`` at one position t (or, given a contrast token Y,
the logit difference X − Y there). One site at a time is restored from the clean run into the corrupted one:

- ``enc``: encoder layer l's output at source position s, (Le, S);
- ``dec``: decoder layer l's residual stream after sublayer k (Add & Norm 1, 2, 3: after masked self-attention,
  cross-attention, the FFN) at target position p <= t, (L, 3, t + 1);
- ``heads``: head h's output (its context α·V, before W_O) at every position, self- and cross-attention, (2, L, H).

Every patched copy is one row of a batch run stage by stage through the model's own modules, from the first layer
and the first decoder position it restores (what comes before is the corrupted run's, computed once; causal
attention leaves the earlier positions as they were): a restore is
``torch.where`` on the stream (the encoder's and the decoder's) or a ``HeadMask`` whose fill is the clean context
(keep 0 for a restored head, 1 and fill 0 elsewhere, so an unrestored row computes what the corrupted run does). No
hooks, nothing kept on the modules. Shapes: B rows, S source tokens, P = t + 1 decoder positions, D d_model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from model.core import keys
from model.core.constants import PATCH_SUBLAYERS
from model.core.tokenizer import Tokenizer
from model.core.transformer import HeadMask, Transformer, causal_mask
from model.interpret.attribution import as_ids

NOISE_SCALE = 3.0  # ROME's ν = 3σ
NOISE_SEED = 0
SUBLAYERS = ("self", "cross", "ffn")  # the decoder residual after Add & Norm 1, 2, 3
SUBLAYER_LABELS = dict(zip(SUBLAYERS, PATCH_SUBLAYERS))
HEAD_KINDS = ("self", "cross")
ROWS_PER_PASS = 512  # rows per batched pass: bounds memory (a row of the bundled model's 16 positions is ~0.5 MB)
# a copy restoring from decoder position p starts at p rounded down to a multiple of this, with the corrupted run's
# keys before it: fewer, larger batches than one per position (8 measured fastest of 1, 4 and 8, benchmarks/patching.py)
PREFIX_BLOCK = 8

# a site: ("enc", layer, source position) | ("dec", layer, sublayer index, position) | ("self"|"cross", layer, head)
Site = tuple


@dataclass(frozen=True)
class Corruption:
    """How the corrupted run is made: ``source`` (another source's ids, of the clean one's token length) or ``noise``
    (Gaussian noise of ``scale`` × ``std`` added to every clean source token's embedding, drawn from ``seed``)."""

    kind: str  # "source" | "noise"
    std: float = 0.0  # the token embeddings' standard deviation (noise only)
    scale: float = NOISE_SCALE
    seed: int = NOISE_SEED

    def describe(self) -> str:
        if self.kind == "source":
            return "source B"
        return f"source A with Gaussian noise of {self.scale:g} × {self.std:.3g} (the token embeddings' std) added"


@dataclass(frozen=True)
class PatchingMap:
    """One measured quantity with each site restored alone, and without restoring (``corrupted``) or clean."""

    enc: np.ndarray  # (Le, S)
    dec: np.ndarray  # (L, 3, P)
    heads: np.ndarray  # (2, L, H): self-attention, cross-attention
    clean: float
    corrupted: float
    metric: str  # "prob": p(X) | "diff": logit X − logit Y

    def restored(self, values: np.ndarray) -> np.ndarray:
        """The share of the clean − corrupted gap a site brings back (NaN where clean equals corrupted)."""
        gap = self.clean - self.corrupted
        with np.errstate(invalid="ignore", divide="ignore"):
            return (np.asarray(values, np.float64) - self.corrupted) / gap if gap else np.full(np.shape(values), np.nan)


@dataclass(frozen=True)
class Patching:
    position: int
    target_id: int  # X: A's token at ``position``
    contrast_id: int | None  # Y, or None
    corruption: Corruption
    prob: PatchingMap  # p(X)
    diff: PatchingMap | None  # logit X − logit Y (with a contrast)
    corrupted_top: np.ndarray  # (T,) the corrupted run's most likely token at every position (teacher-forced)


def embedding_std(model: Transformer) -> float:
    """Standard deviation of the scaled token embeddings (what the encoder reads), over the whole vocabulary."""
    return float((model.embed.weight.detach() * model.src_embed.scale).std())


@dataclass(frozen=True)
class _Clean:
    """One run's streams, one row: what restoring copies from the clean run, and where a patched copy of the
    corrupted run starts."""

    src_in: Tensor  # (1, S, D) the encoder's input (embeddings and positions)
    tgt_in: Tensor  # (1, P, D) the decoder's input
    enc: Tensor  # (Le, S, D) each encoder layer's output
    dec: Tensor  # (L, 3, P, D) the decoder residual after each sublayer
    ctx: Tensor  # (2, L, H, P, d_k) each head's context

    def memory(self, model: Transformer) -> Tensor:
        x = self.enc[-1][None]  # (1, S, D)
        return x if model.enc_norm is None else model.enc_norm(x)  # the final norm of a pre-norm stack

    def enc_input(self, layer: int) -> Tensor:
        return self.src_in if layer == 0 else self.enc[layer - 1][None]  # (1, S, D)

    def dec_input(self, layer: int) -> Tensor:
        return self.tgt_in if layer == 0 else self.dec[layer - 1, 2][None]  # (1, P, D)


def _needed(clean: _Clean | None) -> _Clean:
    """The clean run a restore copies from (a site restored without one is a caller's bug)."""
    if clean is None:
        raise ValueError("restoring a site needs the clean run")
    return clean


def _source_tokens(model: Transformer, src: Tensor) -> Tensor:
    return model.embed(src)[None] * model.src_embed.scale  # (1, S, D)


def _encode(
    model: Transformer,
    x: Tensor,  # (1, S, D) the input to encoder layer ``start``
    start: int = 0,
    enc_mask: Tensor | None = None,  # (B, Le, S) bool: restore encoder layer l at source position s
    clean: _Clean | None = None,
) -> tuple[Tensor, list[Tensor]]:
    """The memory (1 or B, S, D) and each encoder layer's output from ``start`` on, each row with its sites restored."""
    S = x.shape[1]
    enc_bias = None if model.enc_bias is None else model.enc_bias(S, S)  # (1, H, S, S): T5's relative positions
    out = []
    for i in range(start, model.cfg.n_encoder_layers):
        x, _ = model.encoder_stack[i](x, None, position_bias=enc_bias)  # (1 or B, S, D); the sources hold no padding
        if enc_mask is not None and enc_mask[:, i].any():
            x = torch.where(enc_mask[:, i, :, None], _needed(clean).enc[i], x)
        out.append(x)
    return (x if model.enc_norm is None else model.enc_norm(x)), out


def _decode(
    model: Transformer,
    memory: Tensor,  # (1 or B, S, D)
    y: Tensor,  # (B, P, D) the input to decoder layer ``start``
    start: int = 0,
    masks: tuple[Tensor, Tensor] | None = None,  # (B, L, 3, P), (B, 2, L, H) bool: the decoder sites, the heads
    clean: _Clean | None = None,
    keep: bool = False,
    prefix: Sequence[tuple[Tensor, Tensor]] = (),  # each layer's self-attention K, V (1, H, f, d_k) of positions < f
) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    """Logits (B, V) at the last position P − 1, each row with its sites restored, from decoder layer ``start`` on;
    ``keep`` (one row): also the residual after each sublayer (P, D) and each head's context (H, P, d_k). With a
    ``prefix``, ``y`` holds only the positions f … P − 1 (f: the prefix's length), the rows' first f positions being
    the prefix's run's in every layer (a restore at position f or later leaves them, causally, as they were)."""
    f = prefix[start][0].shape[2] if prefix else 0
    B, n = y.shape[0], y.shape[1]  # n = P − f positions computed
    P = f + n
    mask = causal_mask(n, f, device=y.device)  # (n, P)
    dec_bias = None if model.dec_bias is None else model.dec_bias(n, P, f)  # (1, H, n, P)
    dec_mask, head_mask = (None, None) if masks is None else masks
    res, ctx = [], []
    for i in range(start, model.cfg.n_decoder_layers):
        layer = model.decoder_stack[i]
        heads: list[HeadMask | None] = [None, None]
        if head_mask is not None:
            for k in range(2):
                m = head_mask[:, k, i]  # (B, H)
                if m.any():
                    mf = m[:, :, None, None].float()
                    heads[k] = HeadMask(
                        keep=1.0 - mf, fill=mf * _needed(clean).ctx[k, i][:, f:]
                    )  # (B, H, 1, 1), (B, H, n, d_k)
        for k, (attn, norm) in enumerate(((layer.self_attn, layer.norm1), (layer.cross_attn, layer.norm2))):
            h = norm.sublayer_input(y)  # y (post-norm) or Norm(y) (pre-norm): what the sublayer reads
            K, V = attn.project_kv(h if k == 0 else memory)  # (B or 1, H, n or S, d_k)
            if k == 0 and f:
                K, V = (torch.cat([c.expand(B, -1, -1, -1), x], 2) for c, x in zip(prefix[i], (K, V)))  # (B, H, P, d_k)
            a, rec = attn(
                h,
                K.expand(B, -1, -1, -1),
                V.expand(B, -1, -1, -1),
                mask if k == 0 else None,
                record=keep,
                heads=heads[k],
                position_bias=dec_bias if k == 0 else None,
            )
            if keep:
                ctx.append(rec["context"][0])  # (H, P, d_k)
            y, _ = norm(y, a)
            y = _restore(y, dec_mask, clean, i, k, f)
            res.append(y[0])
        z, _ = layer.ffn(layer.norm3.sublayer_input(y))
        y, _ = layer.norm3(y, z)
        y = _restore(y, dec_mask, clean, i, 2, f)
        res.append(y[0])
    return model.logits(y[:, -1:])[:, 0], res, ctx  # (B, V)


def _forward(model: Transformer, src_tok: Tensor, dec_in: Tensor) -> tuple[Tensor, _Clean]:
    """One unpatched run of ``src_tok`` (1, S, D) teacher-forced on ``dec_in`` (P,): its logits (1, V) at the last
    position and every stream a patched copy restores from or starts from."""
    cfg = model.cfg
    src_in = model.src_embed.dropout(model.src_embed.place(src_tok))  # (1, S, D)
    memory, enc_out = _encode(model, src_in)
    tgt_in = model.tgt_embed(dec_in[None])[0]  # (1, P, D)
    logits, res, ctx = _decode(model, memory, tgt_in, keep=True)
    H, L, P = cfg.n_heads, cfg.n_decoder_layers, dec_in.numel()
    ctxs = torch.stack(ctx).view(L, 2, H, P, cfg.d_k).transpose(0, 1)  # (2, L, H, P, d_k)
    return logits, _Clean(
        src_in, tgt_in, torch.stack([e[0] for e in enc_out]), torch.stack(res).view(L, 3, P, -1), ctxs
    )


def _restore(y: Tensor, dec_mask: Tensor | None, clean: _Clean | None, layer: int, k: int, f: int = 0) -> Tensor:
    """y (B, n, D) at positions f … with the rows' sites after sublayer k of ``layer`` restored."""
    if dec_mask is None or not dec_mask[:, layer, k, f:].any():
        return y
    return torch.where(dec_mask[:, layer, k, f:, None], _needed(clean).dec[layer, k][f:], y)  # (B, n, D)


def _first_layer(model: Transformer, sites: Sequence[Site]) -> tuple[bool, int, int]:
    """Where a patched copy starts to differ from the corrupted run: (in the encoder, its layer, 0) at the first
    encoder layer restored, else (in the decoder, its layer, its first position) at the first decoder layer restored
    (after the last layer: a copy that restores nothing) and the first position restored, rounded down to a multiple of
    PREFIX_BLOCK (a head: every position)."""
    enc = [site[1] for site in sites if site[0] == "enc"]
    if enc:
        return True, min(enc), 0
    first = min((site[3] // PREFIX_BLOCK * PREFIX_BLOCK if site[0] == "dec" else 0 for site in sites), default=0)
    return False, min((site[1] for site in sites), default=model.cfg.n_decoder_layers), first


def _masks(model: Transformer, S: int, P: int, rows: Sequence[Sequence[Site]]) -> tuple[Tensor, Tensor, Tensor]:
    cfg = model.cfg
    B = len(rows)
    enc = torch.zeros(B, cfg.n_encoder_layers, S, dtype=torch.bool, device=model.device)
    dec = torch.zeros(B, cfg.n_decoder_layers, 3, P, dtype=torch.bool, device=model.device)
    heads = torch.zeros(B, 2, cfg.n_decoder_layers, cfg.n_heads, dtype=torch.bool, device=model.device)
    for r, sites in enumerate(rows):
        for site in sites:
            if site[0] == "enc":
                enc[r, site[1], site[2]] = True
            elif site[0] == "dec":
                dec[r, site[1], site[2], site[3]] = True
            elif site[0] in HEAD_KINDS:
                heads[r, HEAD_KINDS.index(site[0]), site[1], site[2]] = True
            else:
                raise ValueError(f"not a site: {site!r}")
    return enc, dec, heads


def all_sites(model: Transformer, S: int, position: int) -> list[Site]:
    """Every site of the maps, in the order of the map arrays: encoder (layer, source position), decoder (layer,
    sublayer, position), heads (kind, layer, head)."""
    cfg = model.cfg
    return [
        *(("enc", l_, s) for l_ in range(cfg.n_encoder_layers) for s in range(S)),
        *(("dec", l_, k, p) for l_ in range(cfg.n_decoder_layers) for k in range(3) for p in range(position + 1)),
        *((kind, l_, h) for kind in HEAD_KINDS for l_ in range(cfg.n_decoder_layers) for h in range(cfg.n_heads)),
    ]


class Patcher:
    """A clean and a corrupted run of one pair, ready to run batches of patched copies (``run``)."""

    @torch.inference_mode()
    def __init__(
        self,
        model: Transformer,
        src_a: Sequence[int],  # (S,) </s> included
        out_ids: Sequence[int],  # A's output y1 … yn (</s> included when it ended): the teacher-forced target
        src_b: Sequence[int] | None = None,  # None: noise corruption
        noise_scale: float = NOISE_SCALE,
        seed: int = NOISE_SEED,
    ):
        cfg = model.cfg
        if model.training:
            raise ValueError("model is in training mode (dropout would make the runs random): call model.eval()")
        self.model = model
        self.src = as_ids(src_a, "source A", cfg.vocab_size, model.device)
        self.out = as_ids(out_ids, "the output", cfg.vocab_size, model.device)
        if max(self.src.numel(), self.out.numel()) > cfg.max_len:
            raise ValueError(
                f"source ({self.src.numel()}) or output ({self.out.numel()}) longer than the model's "
                f"max_len={cfg.max_len}"
            )
        self.dec_in = torch.cat([self.out.new_tensor([cfg.decoder_start_id]), self.out[:-1]])  # (T,)
        self.clean_tok = _source_tokens(model, self.src)  # (1, S, D)
        if src_b is None:
            std = embedding_std(model)
            self.corruption = Corruption("noise", std, float(noise_scale), int(seed))
            gen = torch.Generator().manual_seed(int(seed))
            # drawn on the CPU whatever the device, so a seed gives the same noise everywhere
            noise = torch.randn(self.clean_tok.shape, generator=gen).to(self.clean_tok.device) * (noise_scale * std)
            self.corrupt_tok = self.clean_tok + noise
        else:
            b = as_ids(src_b, "source B", cfg.vocab_size, model.device)
            if b.numel() != self.src.numel():
                raise ValueError(
                    f"sources A and B have {self.src.numel()} and {b.numel()} tokens: position-wise "
                    "patching needs the same token length (or use noise corruption)"
                )
            if torch.equal(b, self.src):
                raise ValueError("sources A and B are the same: there is nothing to restore")
            self.corruption = Corruption("source")
            self.corrupt_tok = _source_tokens(model, b)
        self.src_b = None if src_b is None else [int(i) for i in src_b]

    @torch.inference_mode()
    def corrupted_top(self) -> np.ndarray:
        """(T,) the corrupted run's most likely token at every position, teacher-forced on A's output."""
        memory, _, _ = self.model.encode(self.src[None], tok=self.corrupt_tok)
        logits, _, _ = self.model.decode(self.dec_in[None], memory, None)
        return logits[0].argmax(-1).cpu().numpy()

    def check_position(self, position: int) -> int:
        T = self.out.numel()
        if not 0 <= position < T:
            raise ValueError(f"position {position} is beyond the output: it has positions 0 to {T - 1}")
        return int(position)

    @torch.inference_mode()
    def clean(self, position: int) -> tuple[Tensor, _Clean]:
        """The clean run up to ``position``: its logits (1, V) there and what restoring copies."""
        return _forward(self.model, self.clean_tok, self.dec_in[: position + 1])

    @torch.inference_mode()
    def run(self, position: int, rows: Sequence[Sequence[Site]], clean: _Clean | None = None) -> Tensor:
        """Logits (len(rows), V) at ``position`` of the corrupted run with each row's sites restored from the clean
        run. Rows are grouped by the layer and the decoder position where they first differ from the corrupted run
        (``_first_layer``), and each group starts there from the corrupted run's stream, with its keys and values
        before that position (what comes before is the same in every row: computed once), in batched passes of
        ROWS_PER_PASS rows; a group that restores nothing in the encoder reads the corrupted memory, one row for
        all."""
        model, position = self.model, self.check_position(position)
        if clean is None:
            clean = self.clean(position)[1]
        P, S = position + 1, self.src.numel()
        _, corrupted = _forward(model, self.corrupt_tok, self.dec_in[:P])
        memory = corrupted.memory(model)  # (1, S, D)
        groups: dict[tuple[bool, int, int], list[int]] = {}
        for r, sites in enumerate(rows):
            groups.setdefault(_first_layer(model, sites), []).append(r)
        kv = [  # each layer's self-attention K, V (1, H, P, d_k) in the corrupted run: the prefix a copy reads
            layer.self_attn.project_kv(layer.norm1.sublayer_input(corrupted.dec_input(i)))
            for i, layer in enumerate(model.decoder_stack)
        ] if any(f for _, _, f in groups) else []  # fmt: skip
        out = torch.zeros(len(rows), model.cfg.vocab_size, device=model.device)
        for (in_encoder, layer, f), members in groups.items():
            prefix = [(K[:, :, :f], V[:, :, :f]) for K, V in kv] if f else []
            for b in range(0, len(members), ROWS_PER_PASS):
                part = members[b : b + ROWS_PER_PASS]
                enc, dec, heads = _masks(model, S, P, [rows[i] for i in part])
                if in_encoder:
                    mem, _ = _encode(model, corrupted.enc_input(layer), layer, enc, clean)  # (B, S, D)
                    y, start = corrupted.tgt_in.expand(len(part), -1, -1), 0
                else:
                    mem, y, start = memory, corrupted.dec_input(layer)[:, f:].expand(len(part), -1, -1), layer
                out[part] = _decode(model, mem, y, start, (dec, heads), clean, prefix=prefix)[0]
        return out

    def map(self, position: int, contrast_id: int | None = None) -> Patching:
        """Every site restored alone (``all_sites``), in one batched run, measured as p(X) and, with a contrast
        token Y, as logit X − logit Y."""
        cfg = self.model.cfg
        position = self.check_position(position)
        x = int(self.out[position])
        if contrast_id is not None:
            contrast_id = int(contrast_id)
            if not 0 <= contrast_id < cfg.vocab_size:
                raise ValueError(f"contrast id {contrast_id} is outside the vocabulary")
            if contrast_id == x:
                raise ValueError("the contrast token is the chosen token itself: there is nothing to compare")
        clean_logits, clean = self.clean(position)
        sites = all_sites(self.model, self.src.numel(), position)
        logits = self.run(position, [[]] + [[s] for s in sites], clean)  # row 0 restores nothing
        logits = torch.cat([clean_logits, logits]).double()  # (2 + n, V): clean, corrupted, one per site
        maps = {"prob": logits.softmax(-1)[:, x].cpu().numpy()}
        if contrast_id is not None:
            maps["diff"] = (logits[:, x] - logits[:, contrast_id]).cpu().numpy()
        Le, L, H, S, P = cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.n_heads, self.src.numel(), position + 1
        n_enc, n_dec = Le * S, L * 3 * P

        def split(v: np.ndarray, metric: str) -> PatchingMap:
            s = v[2:]
            return PatchingMap(
                enc=s[:n_enc].reshape(Le, S),
                dec=s[n_enc : n_enc + n_dec].reshape(L, 3, P),
                heads=s[n_enc + n_dec :].reshape(2, L, H),
                clean=float(v[0]),
                corrupted=float(v[1]),
                metric=metric,
            )

        return Patching(
            position=position,
            target_id=x,
            contrast_id=contrast_id,
            corruption=self.corruption,
            prob=split(maps["prob"], "prob"),
            diff=split(maps["diff"], "diff") if "diff" in maps else None,
            corrupted_top=self.corrupted_top(),
        )


def default_position(patcher: Patcher) -> int:
    """The first position where the corrupted run's top token differs from A's token (0 when none does): where
    the corruption changes what the model would say."""
    differ = np.flatnonzero(patcher.corrupted_top() != patcher.out.cpu().numpy())
    return int(differ[0]) if differ.size else 0


def activation_patching(
    model: Transformer,
    src_a: Sequence[int],
    out_ids: Sequence[int],
    src_b: Sequence[int] | None = None,
    position: int | None = None,
    contrast_id: int | None = None,
    noise_scale: float = NOISE_SCALE,
    seed: int = NOISE_SEED,
) -> Patching:
    """The patching maps of one pair (see the module's doc): ``src_b`` None corrupts A with noise; ``position``
    None takes ``default_position``."""
    p = Patcher(model, src_a, out_ids, src_b, noise_scale, seed)
    return p.map(default_position(p) if position is None else position, contrast_id)


def report(tokenizer: Tokenizer, p: Patcher, r: Patching) -> dict[str, np.ndarray]:
    """The maps of one patching run as named arrays (docs/cli.md lists the keys), for the command line and downloads."""
    P = r.position + 1
    out = {
        keys.TOKENS_SRC: np.array(tokenizer.tokens(p.src.tolist())),
        keys.TOKENS_DEC_INPUT: np.array(tokenizer.tokens(p.dec_in[:P].tolist())),
        keys.TOKENS_LABEL: np.array(tokenizer.tokens(p.out[:P].tolist())),
        keys.SRC_IDS: p.src.cpu().numpy(),
        "out_ids": p.out.cpu().numpy(),
        "position": np.array(r.position),
        "target": np.array(tokenizer.id_to_token(r.target_id)),
        "target_id": np.array(r.target_id),
        "corruption": np.array(r.corruption.kind),
        "corruption.text": np.array(r.corruption.describe()),
        "corrupted_top": np.array(tokenizer.tokens(r.corrupted_top.tolist())),
    }
    if p.src_b is not None:
        out["tokens.src_b"], out["src_b_ids"] = np.array(tokenizer.tokens(p.src_b)), np.array(p.src_b)
    else:
        out["noise.std"], out["noise.scale"], out["noise.seed"] = (
            np.array(v) for v in (r.corruption.std, r.corruption.scale, r.corruption.seed)
        )
    maps = {"prob": r.prob, "diff": r.diff}
    if r.contrast_id is not None:
        out["contrast"], out["contrast_id"] = np.array(tokenizer.id_to_token(r.contrast_id)), np.array(r.contrast_id)
    for name, m in maps.items():
        if m is not None:
            out.update(
                {
                    f"{name}.enc": m.enc,
                    f"{name}.dec": m.dec,
                    f"{name}.heads": m.heads,
                    f"{name}.clean": np.array(m.clean),
                    f"{name}.corrupted": np.array(m.corrupted),
                }
            )
    return out


def site_rows(r: dict[str, np.ndarray]) -> list[dict]:
    """Every value of a ``report``'s maps as one row (for a CSV): metric, map, layer, part (the sublayer or the
    attention), index (position, source position or head), its token, the value."""
    src, reads = [str(t) for t in r[keys.TOKENS_SRC]], [str(t) for t in r[keys.TOKENS_DEC_INPUT]]
    rows = []
    for metric in ("prob", "diff"):
        if f"{metric}.enc" not in r:
            continue
        for (layer, s), v in np.ndenumerate(r[f"{metric}.enc"]):
            rows.append(dict(metric=metric, map="encoder", layer=layer, part="output", index=s, token=src[s], value=v))
        for (layer, k, p), v in np.ndenumerate(r[f"{metric}.dec"]):
            rows.append(
                dict(
                    metric=metric,
                    map="decoder",
                    layer=layer,
                    part=SUBLAYER_LABELS[SUBLAYERS[k]],
                    index=p,
                    token=reads[p],
                    value=v,
                )
            )
        for (k, layer, h), v in np.ndenumerate(r[f"{metric}.heads"]):
            rows.append(dict(metric=metric, map="heads", layer=layer, part=HEAD_KINDS[k], index=h, token="", value=v))
    return rows
