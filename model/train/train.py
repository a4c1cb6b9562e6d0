"""Train the English→French Transformer on Tatoeba + Multi30k and write a model directory.

    python -m model.train --out assets/models/en-fr --state-dir runs/en-fr --minutes 45 --device cpu

(the bundled model's full command is in docs/training.md and its model card)

- Length-bucketed batches by token count, AdamW, linear warm-up then inverse-sqrt decay or
  (``--decay none --cooldown F``) the peak held and a linear cooldown to 0 over the last F of the
  minutes, label smoothing, gradient clipping, dropout, a fixed seed.
- ``--substitute RATE``: each epoch, that share of the pairs carrying a recurring name, a number, a clock
  time or a date gets other names (Faker's lists, many languages), numbers, times or dates on both sides
  (``model.train.copying``), so that the model learns to carry them through; ``--repeat-timed N`` adds N more
  substituted copies of each pair with a time or date and ``--repeat-named N`` of each with a recurring name.
  ``--substitute-words RATE``: that share of the pairs carrying a word French writes alike ("piano") get
  another such word on both sides, so that rare words of that kind are carried through too.
- Every ``--eval-minutes`` (or ``--eval-steps``): validation loss and greedy BLEU (sacrebleu) on a
  fixed subset of Tatoeba val (multi-reference) and Multi30k val, translated by the shipped decoding path
  (``model.decode.decoding.translate_corpus``, as ``benchmarks/bleu.py``); the best model so far (mean of
  the two BLEUs) is written to ``--out``; the resumable state goes to ``--state-dir/train_state``
  (safetensors for tensors, JSON for the rest; no pickle). ``--resume`` continues from it.
- ``--minutes`` is the wall-clock budget of the whole run, resumed sessions included; the loop
  keeps time for the final evaluation. At the end the last ``--average`` evaluation snapshots are
  averaged and the average is shipped when it scores better than the best single snapshot.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, load_model, save_file, save_model

from model.core.config import ModelConfig
from model.core.jsonio import write as write_json
from model.core.tokenizer import Tokenizer
from model.core.transformer import Transformer
from model.io.checkpoint import count_parameters, load_model_dir, save_model_dir, use_threads
from model.train.data import (
    SPLIT_SEED,
    add_byte_fallback,
    default_data_dir,
    group_by_source,
    load_corpora,
    make_batches,
    reference_streams,
)

REPO = Path(__file__).resolve().parents[2]


def add_pair_arguments(p: argparse.ArgumentParser) -> None:
    """Which training pairs each epoch sees: length cut, Multi30k repeats, substitutions."""
    p.add_argument("--max-len", type=int, default=64, help="drop training pairs longer than this (tokens)")
    p.add_argument(
        "--multi30k-repeat",
        type=int,
        default=1,
        help="each epoch sees every Multi30k training pair this many times (Tatoeba's once)",
    )
    p.add_argument(
        "--substitute",
        type=float,
        default=0.0,
        help="share of name/number/time/date pairs given new ones each epoch (0: none)",
    )
    p.add_argument(
        "--repeat-timed",
        type=int,
        default=0,
        help="with --substitute: each epoch, this many more substituted copies of every pair carrying a "
        "clock time or date (the corpora have few)",
    )
    p.add_argument(
        "--repeat-named",
        type=int,
        default=0,
        help="with --substitute: each epoch, this many more substituted copies of every pair carrying a "
        "recurring name (more names than the corpora's few)",
    )
    p.add_argument(
        "--substitute-words",
        type=float,
        default=0.0,
        help='each epoch, this share of the pairs carrying a word that French writes alike ("table") get '
        "another such word on both sides (0: none)",
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m model.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=None, help="corpus directory (default: <repo>/../shared/data)")
    p.add_argument("--out", type=Path, default=REPO / "assets" / "models" / "en-fr", help="model directory to write")
    p.add_argument("--state-dir", type=Path, default=REPO / "runs" / "en-fr", help="resumable state + logs")
    p.add_argument("--resume", action="store_true", help="continue from STATE_DIR/train_state")
    p.add_argument(
        "--init",
        type=Path,
        default=None,
        help="continue from this model directory (its architecture; byte fallback added)",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--minutes", type=float, default=45.0, help="wall-clock budget of the whole run")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--split-seed", type=int, default=SPLIT_SEED)
    # model
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--model-max-len", type=int, default=128)
    # optimisation
    add_pair_arguments(p)
    p.add_argument("--max-tokens", type=int, default=5000, help="padded tokens per batch")
    p.add_argument("--lr", type=float, default=1.5e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=800)
    p.add_argument(
        "--decay",
        choices=["inverse-sqrt", "none"],
        default="inverse-sqrt",
        help="after the warm-up: peak * sqrt(warmup / step), or the peak held (warm-up, stable, then --cooldown)",
    )
    p.add_argument(
        "--cooldown",
        type=float,
        default=0.0,
        help="fraction of --minutes at the end over which the learning rate falls linearly to 0 "
        "(0: none, the inverse-sqrt decay to the end)",
    )
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument(
        "--bf16",
        action="store_true",
        help="bfloat16 autocast for forward and backward (~1.3x the throughput on this CPU); weights, "
        "optimizer state, loss and evaluation stay float32",
    )
    # evaluation / logging
    p.add_argument("--eval-minutes", type=float, default=5.0)
    p.add_argument("--eval-steps", type=int, default=None, help="evaluate every N steps instead")
    p.add_argument("--eval-sentences", type=int, default=300, help="per validation set")
    p.add_argument("--average", type=int, default=3, help="average the last N eval snapshots at the end")
    p.add_argument("--log-every", type=int, default=25)
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- tensors


def pad(seqs: list[list[int]], pad_id: int = 0) -> torch.Tensor:
    n = max(len(s) for s in seqs)
    return torch.tensor([s + [pad_id] * (n - len(s)) for s in seqs], dtype=torch.long)


def make_batch(
    src: list[list[int]], tgt: list[list[int]], cfg: ModelConfig, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    src_t = pad([s + [cfg.eos_id] for s in src], cfg.pad_id)
    tgt_in = pad([[cfg.decoder_start_id] + t for t in tgt], cfg.pad_id)
    labels = pad([t + [cfg.eos_id] for t in tgt], cfg.pad_id)
    return src_t.to(device), tgt_in.to(device), labels.to(device)


def lr_at(step: int, peak: float, warmup: int, decay: str = "inverse-sqrt") -> float:
    """Linear warm-up to ``peak`` at ``warmup`` steps, then peak * sqrt(warmup / step), or ``peak`` held."""
    step = max(step, 1)
    if step < warmup or decay == "none":
        return peak * min(step / warmup, 1.0)
    return peak * math.sqrt(warmup / step)


def cooldown_factor(elapsed: float, end: float, cooldown: float) -> float:
    """1 until ``cooldown`` seconds before ``end``, then linearly down to 0 at ``end``. The budget is wall-clock
    time, so the decay is too: the run ends at a learning rate near 0 however many steps it managed."""
    if cooldown <= 0:
        return 1.0
    return min(1.0, max(0.0, (end - elapsed) / cooldown))


@torch.no_grad()
def grow_from(model: Transformer, base: Transformer, seed: int = 0) -> None:
    """Copy ``base``'s weights into ``model``, whose vocabulary is ``base``'s plus rows appended at the end (the
    byte tokens): each new embedding row is the mean of the old rows plus noise of their spread, so the new
    tokens start as ordinary, never-predicted ones."""
    old, new = base.state_dict(), model.state_dict()
    V = base.cfg.vocab_size
    for k, v in new.items():
        if old[k].shape == v.shape:
            v.copy_(old[k])
        elif v.shape[0] > V and old[k].shape[1:] == v.shape[1:] and k.endswith(("embed.weight", "out_proj.weight")):
            v[:V] = old[k]
            g = torch.Generator().manual_seed(seed)
            spread = old[k][4:].std(0)
            v[V:] = old[k][4:].mean(0) + spread * torch.randn(v.shape[0] - V, v.shape[1], generator=g)
        elif k == "final_logits_bias":
            v[:V] = old[k]
            v[V:] = old[k][4:].min()
        else:
            raise ValueError(f"{k}: {tuple(old[k].shape)} in the base model, {tuple(v.shape)} here")


# ----------------------------------------------------------------------------- state IO


def save_state(path: Path, model: Transformer, opt: torch.optim.Optimizer, meta: dict) -> None:
    """model.safetensors + optimizer.safetensors + state.json; written to a temp dir then swapped."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    save_model(model, str(tmp / "model.safetensors"))
    sd = opt.state_dict()
    tensors = {"rng.torch": torch.get_rng_state()}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            tensors[f"state.{idx}.{k}"] = v.detach().cpu().contiguous() if torch.is_tensor(v) else torch.tensor(v)
    save_file(tensors, str(tmp / "optimizer.safetensors"))
    meta = {**meta, "param_groups": sd["param_groups"]}
    write_json(tmp / "state.json", meta)
    if path.exists():
        old = path.with_name(path.name + ".old")
        path.rename(old)
        tmp.rename(path)
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    else:
        tmp.rename(path)


def load_state(path: Path, model: Transformer, opt: torch.optim.Optimizer) -> dict:
    load_model(model, str(path / "model.safetensors"))
    meta = json.loads((path / "state.json").read_text())
    tensors = load_file(str(path / "optimizer.safetensors"))
    torch.set_rng_state(tensors.pop("rng.torch"))
    state: dict[int, dict] = {}
    for key, v in tensors.items():
        _, idx, k = key.split(".", 2)
        state.setdefault(int(idx), {})[k] = v
    opt.load_state_dict({"state": state, "param_groups": meta.pop("param_groups")})
    return meta


# ----------------------------------------------------------------------------- evaluation


class Validator:
    def __init__(self, corpora, n: int, seed: int):
        import sacrebleu  # noqa: F401  (fail early when missing)

        groups = group_by_source(corpora.val_tatoeba)
        random.Random(seed).shuffle(groups)
        self.tat = groups[:n]
        self.m30k = corpora.val_multi30k[:n]
        self.loss_pairs = [(en, refs[0]) for en, refs in self.tat] + self.m30k

    @torch.no_grad()
    def loss(self, model: Transformer, tokenizer: Tokenizer, cfg: ModelConfig, device: torch.device | str) -> float:
        model.eval()
        total, count = 0.0, 0
        pairs = sorted(self.loss_pairs, key=lambda p: len(p[0]))
        for b in range(0, len(pairs), 64):
            chunk = pairs[b : b + 64]
            src = [tokenizer.encode(e)[: cfg.max_len - 1] for e, _ in chunk]
            tgt = [tokenizer.encode(f)[: cfg.max_len - 1] for _, f in chunk]
            s, ti, lab = make_batch(src, tgt, cfg, device)
            logits = model(s, ti)
            total += F.cross_entropy(
                logits.flatten(0, 1), lab.flatten(), ignore_index=cfg.pad_id, reduction="sum"
            ).item()
            count += int((lab != cfg.pad_id).sum())
        model.train()
        return total / max(count, 1)

    def translations(self, model: Transformer, tokenizer: Tokenizer) -> tuple[list[str], list[str]]:
        """Greedy translations of both subsets by the shipped decoding path (``translate_corpus``)."""
        from model.decode.decoding import translate_corpus

        return (
            translate_corpus(model, tokenizer, [en for en, _ in self.tat]),
            translate_corpus(model, tokenizer, [en for en, _ in self.m30k]),
        )

    def bleu(self, model: Transformer, tokenizer: Tokenizer) -> dict:
        import sacrebleu

        hyp_t, hyp_m = self.translations(model, tokenizer)
        b_t = sacrebleu.corpus_bleu(hyp_t, reference_streams(self.tat)).score
        b_m = sacrebleu.corpus_bleu(hyp_m, [[fr for _, fr in self.m30k]]).score
        return {"bleu_tatoeba": round(b_t, 2), "bleu_multi30k": round(b_m, 2), "bleu": round((b_t + b_m) / 2, 2)}


# ----------------------------------------------------------------------------- main


def log(msg: str) -> None:
    print(msg, flush=True)


# Long on purpose: the training loop and its evaluate/checkpoint closures share one resumable state (step, epoch,
# batch, best score, snapshots); read top to bottom it is the recipe: data, tokenizer, model, loop, averaging.
def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    t_start = time.time()
    use_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    state_dir = args.state_dir
    train_state = state_dir / "train_state"
    state_dir.mkdir(parents=True, exist_ok=True)
    resuming = args.resume and (train_state / "state.json").is_file()
    if args.resume and not resuming:
        log(f"--resume: no state in {train_state}, starting fresh")

    data_dir = args.data or default_data_dir()
    corpora = load_corpora(data_dir, args.split_seed)
    log(f"data {data_dir}: {json.dumps(corpora.counts)}; tatoeba test split sha256 {corpora.digest}")

    tok_path = state_dir / "tokenizer.json"
    init = load_model_dir(args.init) if args.init else None
    if resuming and tok_path.is_file():
        tokenizer = Tokenizer.load(tok_path)
    elif init is not None:
        tokenizer = add_byte_fallback(init.tokenizer)
        tokenizer.save(tok_path)
        log(
            f"init {args.init}: its {init.tokenizer.vocab_size:,}-token vocabulary"
            f"{'' if init.tokenizer.byte_fallback else ' + 256 byte-fallback tokens'}"
        )
    else:
        texts = [t for pair in corpora.train for t in pair]
        tokenizer = train_tokenizer_timed(texts, args.vocab_size)
        tokenizer.save(tok_path)

    if init is not None:
        cfg = replace(init.cfg, vocab_size=tokenizer.vocab_size, dropout=args.dropout)
    else:
        cfg = ModelConfig(
            vocab_size=tokenizer.vocab_size,
            d_model=args.d_model,
            n_heads=args.heads,
            d_ff=args.d_ff,
            n_encoder_layers=args.layers,
            n_decoder_layers=args.layers,
            max_len=args.model_max_len,
            dropout=args.dropout,
            tie_output=True,
        )
    model = Transformer(cfg).to(device)
    if init is not None and not resuming:
        grow_from(model, init.model)
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.98),
        eps=1e-9,
    )
    log(f"model: {count_parameters(model):,} parameters, {json.dumps(cfg.__dict__)}")

    # tokenize the training set once; Multi30k (the in-domain captions, last in corpora.train) may be repeated.
    # Each epoch re-tokenizes only the pairs that its substitutions changed.
    base_src = tokenizer.encode_batch([e for e, _ in corpora.train])
    base_tgt = tokenizer.encode_batch([f for _, f in corpora.train])
    n_m30k = corpora.counts["multi30k_train_pairs"]
    repeats = list(range(len(base_src) - n_m30k, len(base_src))) * (args.multi30k_repeat - 1) if n_m30k else []
    substituter = None
    if args.substitute > 0 or args.substitute_words > 0:
        from model.train.copying import Substituter

        substituter = Substituter(
            corpora.train,
            args.substitute,
            seed=args.seed,
            repeat=args.repeat_timed,
            repeat_named=args.repeat_named,
            word_rate=args.substitute_words,
        )
        log(
            f"substitution: rate {args.substitute:g} of {substituter.eligible:,} pairs carrying "
            f"{', '.join(substituter.names)}, numbers, times or dates; {substituter.timed:,} with a time or date, "
            f"{args.repeat_timed} more copies each; {substituter.named:,} with a name, "
            f"{args.repeat_named} more each; rate {args.substitute_words:g} of {substituter.with_identical:,} "
            f"carrying one of {len(substituter.words):,} words French writes alike"
        )

    def epoch_data(epoch: int):
        src, tgt = list(base_src), list(base_tgt)
        if substituter is not None:
            subs = substituter.epoch(epoch)
            idx = sorted(subs)
            for i, s_ids, t_ids in zip(
                idx,
                tokenizer.encode_batch([subs[i][0] for i in idx]),
                tokenizer.encode_batch([subs[i][1] for i in idx]),
            ):
                src[i], tgt[i] = s_ids, t_ids
            extra = substituter.extra(epoch)
            src += tokenizer.encode_batch([e for e, _ in extra])
            tgt += tokenizer.encode_batch([f for _, f in extra])
        src += [base_src[i] for i in repeats]
        tgt += [base_tgt[i] for i in repeats]
        keep = [i for i in range(len(src)) if len(src[i]) + 1 <= args.max_len and len(tgt[i]) + 1 <= args.max_len]
        return [src[i] for i in keep], [tgt[i] for i in keep]

    data_epoch = 0  # the epoch whose substitutions src_all / tgt_all hold
    src_all, tgt_all = epoch_data(data_epoch)
    log(
        f"training pairs: {len(src_all):,} (≤ {args.max_len} tokens; Multi30k ×{args.multi30k_repeat}), "
        f"{sum(map(len, src_all)) + sum(map(len, tgt_all)) + 2 * len(src_all):,} tokens"
    )

    validator = Validator(corpora, args.eval_sentences, args.seed)
    meta: dict[str, Any] = {"step": 0, "epoch": 0, "batch": 0, "elapsed": 0.0, "best": -1.0, "history": []}
    if resuming:
        meta = load_state(train_state, model, opt)
        log(f"resumed from {train_state}: step {meta['step']}, epoch {meta['epoch']}, batch {meta['batch']}")
    elapsed_before = meta["elapsed"]
    budget = args.minutes * 60.0
    t_session = time.time()

    def elapsed() -> float:
        return elapsed_before + (time.time() - t_session)

    snapshots: list[dict] = []
    best_score = meta["best"]
    history = meta["history"]
    eval_seconds = 0.0

    def evaluate(final: bool = False) -> float:
        nonlocal best_score, eval_seconds
        t0 = time.time()
        vl = validator.loss(model, tokenizer, cfg, device)
        scores = validator.bleu(model, tokenizer)
        eval_seconds = time.time() - t0
        rec = {"step": meta["step"], "minutes": round(elapsed() / 60, 2), "val_loss": round(vl, 4), **scores}
        history.append(rec)
        improved = scores["bleu"] > best_score
        if improved:
            best_score = scores["bleu"]
            save_model_dir(model, tokenizer, args.out)
        log(f"eval {json.dumps(rec)} ({eval_seconds:.0f}s){' *best, saved to ' + str(args.out) if improved else ''}")
        snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        del snapshots[: -max(args.average, 1)]
        return scores["bleu"]

    def checkpoint() -> None:
        meta.update(
            elapsed=elapsed(),
            best=best_score,
            history=history,
            args={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        )
        save_state(train_state, model, opt, meta)

    model.train()
    last_eval_t = time.time()
    last_eval_step = meta["step"]
    win_loss, win_tok, win_t = 0.0, 0, time.time()
    stop = False
    while not stop:
        if meta["epoch"] != data_epoch:  # epoch 0's data is already there (and a resumed run starts later)
            data_epoch = meta["epoch"]
            src_all, tgt_all = epoch_data(data_epoch)
        src_lens, tgt_lens = [len(x) + 1 for x in src_all], [len(x) + 1 for x in tgt_all]
        batches = make_batches(src_lens, tgt_lens, args.max_tokens, random.Random(args.seed * 100003 + meta["epoch"]))
        while meta["batch"] < len(batches):
            reserve = max(30.0, (2 + (args.average > 1)) * eval_seconds + 20)
            if (args.max_steps is not None and meta["step"] >= args.max_steps) or elapsed() > budget - reserve:
                stop = True
                break
            idx = batches[meta["batch"]]
            src, tgt_in, labels = make_batch([src_all[i] for i in idx], [tgt_all[i] for i in idx], cfg, device)
            step = meta["step"] + 1
            lr = lr_at(step, args.lr, args.warmup, args.decay)
            lr *= cooldown_factor(elapsed(), budget - reserve, args.cooldown * budget)
            for g in opt.param_groups:
                g["lr"] = lr
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
                logits = model(src, tgt_in)
            ntok = int((labels != cfg.pad_id).sum())
            loss = F.cross_entropy(
                logits.float().flatten(0, 1),
                labels.flatten(),
                ignore_index=cfg.pad_id,
                label_smoothing=args.label_smoothing,
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            meta["step"], meta["batch"] = step, meta["batch"] + 1
            win_loss += loss.item() * ntok
            win_tok += ntok
            if step % args.log_every == 0:
                dt = time.time() - win_t
                log(
                    f"step {step:6d} | ep {meta['epoch']} {meta['batch']}/{len(batches)} | lr {lr:.2e} | "
                    f"loss {win_loss / max(win_tok, 1):.3f} | {win_tok / dt:,.0f} tgt tok/s | "
                    f"{elapsed() / 60:.1f}/{args.minutes:g} min"
                )
                win_loss, win_tok, win_t = 0.0, 0, time.time()
            due = (
                (step - last_eval_step >= args.eval_steps)
                if args.eval_steps
                else (time.time() - last_eval_t >= args.eval_minutes * 60)
            )
            if due:
                evaluate()
                checkpoint()
                last_eval_t, last_eval_step = time.time(), step
                win_tok, win_loss, win_t = 0, 0.0, time.time()
        if not stop:
            meta["epoch"], meta["batch"] = meta["epoch"] + 1, 0

    if not history or history[-1]["step"] != meta["step"]:
        evaluate(final=True)
    checkpoint()
    shipped = {"kind": "best", **max(history, key=lambda r: r["bleu"])}
    if args.average > 1 and len(snapshots) > 1:
        avg = {
            k: torch.stack([s[k].float() for s in snapshots]).mean(0).to(snapshots[-1][k].dtype) for k in snapshots[-1]
        }
        model.load_state_dict(avg)
        scores = validator.bleu(model, tokenizer)
        log(f"average of last {len(snapshots)} snapshots: {json.dumps(scores)}")
        if scores["bleu"] > best_score:
            best_score = scores["bleu"]
            save_model_dir(model, tokenizer, args.out)
            shipped = {"kind": f"average of last {len(snapshots)} eval snapshots", "step": meta["step"], **scores}
            log(f"average is best, saved to {args.out}")
    summary = {
        "shipped": shipped,
        "steps": meta["step"],
        "epochs": meta["epoch"] + meta["batch"] / max(len(batches), 1),
        "wall_minutes": round(elapsed() / 60, 2),
        "session_minutes": round((time.time() - t_start) / 60, 2),
        "parameters": count_parameters(model),
        "training_pairs": len(src_all),
        "tatoeba_split_sha256": corpora.digest,
        "counts": corpora.counts,
        "history": history,
        "command": "python -m model.train " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    write_json(state_dir / "summary.json", summary)
    log(f"done: {json.dumps({k: summary[k] for k in ('shipped', 'steps', 'wall_minutes')})}")
    return summary


def train_tokenizer_timed(texts: list[str], vocab_size: int) -> Tokenizer:
    from model.train.data import train_tokenizer

    t0 = time.time()
    tok = train_tokenizer(texts, vocab_size)
    probe = "J'aime l'IA, n'est-ce pas ? Oui ! Élève à l'école « déjà »."
    rt = tok.decode(tok.encode(probe))
    log(
        f"tokenizer: {tok.vocab_size} tokens in {time.time() - t0:.1f}s; round trip {'ok' if rt == probe else repr(rt)}"
    )
    return tok


if __name__ == "__main__":
    main()
