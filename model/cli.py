"""`python -m model`: translate, trace, explain, patch, corpus, lesson, import, import-marian, export-marian.

Every failure the user can cause ends in one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from model.core import keys
from model.core.ablation import MODES
from model.core.config import ModelConfig
from model.core.constants import ATTRIBUTION_METHODS, BATCH_SIZE, HEAD_SENTENCES, MAX_BEAM
from model.core.jsonio import dumps
from model.core.positions import position_labels
from model.core.tokenizer import Tokenizer
from model.decode.decoding import (
    DecodeOptions,
    DecodeResult,
    decode,
    greedy_batch,
    length_batches,
    prepare_ids,
    read_source,
    step_decoder,
)
from model.io.checkpoint import ENV_DEVICE, LoadedModel, ModelDirError, default_model_dir, load_model_dir, set_threads

if TYPE_CHECKING:
    from model.interpret.corpus import Corpus

SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed accepts


def add_model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, default=None, help=f"model directory (default: {default_model_dir()})")
    p.add_argument("--device", default=None, help=f"cpu or cuda (default: ${ENV_DEVICE}, else cpu)")


# Long on purpose: every command's options in one table-like list, the --help a user reads, in docs/cli.md's order.
def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m model", description="Decoder Lens model tools")
    sub = ap.add_subparsers(dest="command", required=True)

    t = sub.add_parser("translate", help="translate English text to French")
    t.add_argument("text", nargs="?", help="the sentence (or use --input)")
    t.add_argument("--input", help="file with one sentence per line, or - for stdin")
    d = DecodeOptions()  # the one source of decoding defaults
    group = t.add_mutually_exclusive_group()
    group.add_argument(
        "--beam",
        type=int,
        metavar="K",
        help=f"beam search with K hypotheses, 1 to {MAX_BEAM} (default: {d.strategy} decoding; 1 is greedy)",
    )
    group.add_argument("--sample", action="store_true", help="sample instead of searching")
    t.add_argument("--temperature", type=float, default=d.temperature)
    t.add_argument("--top-k", type=int, default=d.top_k)
    t.add_argument("--top-p", type=float, default=d.top_p)
    t.add_argument("--seed", type=int, default=d.seed)
    t.add_argument("--length-penalty", type=float, default=d.length_penalty)
    t.add_argument("--max-len", type=int, default=None, help=f"most new tokens, </s> included (default: {d.max_len})")
    t.add_argument(
        "--batch-size",
        type=int,
        default=BATCH_SIZE,
        help=f"with --input: sentences decoded together by batched greedy decoding (default: {BATCH_SIZE})",
    )
    t.add_argument("--json", action="store_true", help="JSON output with tokens and n-best candidates")
    add_model_arg(t)

    tr = sub.add_parser("trace", help="write every stage of a teacher-forced pass to an .npz file")
    tr.add_argument("text")
    tr.add_argument("--target", help="reference translation (default: the model's greedy output)")
    tr.add_argument("--no-mask", action="store_true", help="remove the causal mask (the decoder can cheat)")
    tr.add_argument("--out", required=True, type=Path)
    add_model_arg(tr)

    xp = sub.add_parser("explain", help="logit lens, head ablation, head importance and attribution for one sentence")
    xp.add_argument("text")
    xp.add_argument("--target", help="reference translation (default: the model's greedy output)")
    xp.add_argument("--method", choices=ATTRIBUTION_METHODS, help="attribute each output token to the inputs")
    xp.add_argument("--steps", type=int, default=None, help="integrated-gradients steps (default: the method's)")
    xp.add_argument("--ablate", default="", help="heads to switch off: dec.1.cross.2,dec.0.self.5,enc.0.self.1")
    xp.add_argument("--mode", choices=MODES, default=MODES[0], help="ablation: zeros or the head's mean")
    xp.add_argument("--contrast", help="why the chosen token rather than this one (a word or a token)")
    xp.add_argument(
        "--position", type=int, help="with --contrast: the output position (default: where the contrast comes closest)"
    )
    fmt = xp.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="strict JSON (no NaN: null) with every array")
    fmt.add_argument("--out", type=Path, help="write the arrays to an .npz file")
    add_model_arg(xp)

    pa = sub.add_parser("patch", help="activation patching: restore sites of A's run into B's (or noisy A's)")
    pa.add_argument("a", metavar="A", help="the clean source")
    pa.add_argument("b", metavar="B", nargs="?", help="the corrupted source, of A's token length (or use --noise)")
    pa.add_argument("--target", help="A's translation to teacher-force (default: the model's greedy output)")
    pa.add_argument(
        "--position",
        type=int,
        help="output position measured (default: the first where the corrupted run's top token differs from A's)",
    )
    pa.add_argument("--noise", action="store_true", help="corrupt A's token embeddings with Gaussian noise instead")
    pa.add_argument("--contrast", help="also measure logit X − logit Y for this alternative token Y")
    fmt = pa.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="strict JSON with every map")
    fmt.add_argument("--out", type=Path, help="write the maps to an .npz file")
    add_model_arg(pa)

    co = sub.add_parser("corpus", help="translate and analyse a set: one row per sentence, flags, the head table")
    co.add_argument("file", type=Path, help="plain lines of English, TSV english<TAB>french, or CSV with those columns")
    co.add_argument("--refs", type=Path, help="French references, one a line, for a file of plain lines")
    co.add_argument(
        "--beam", type=int, metavar="K", help=f"beam search with K hypotheses, 1 to {MAX_BEAM} (default: greedy)"
    )
    co.add_argument("--limit", type=int, metavar="N", help="the first N sentences only")
    vs = co.add_mutually_exclusive_group()
    vs.add_argument(
        "--versus-beam", type=int, metavar="K", help="compare with a second run decoded with beam K (1: greedy)"
    )
    vs.add_argument("--versus-model", type=Path, metavar="DIR", help="compare with a second run by this model")
    heads = co.add_mutually_exclusive_group()
    heads.add_argument("--no-heads", action="store_true", help="leave out the head table")
    heads.add_argument(
        "--head-sentences",
        type=int,
        metavar="N",
        default=HEAD_SENTENCES,
        help=f"the head table over the first N sentences (default {HEAD_SENTENCES}; 1,000: 50-80 s on 2 cores)",
    )
    fmt = co.add_mutually_exclusive_group()
    fmt.add_argument("--json", type=Path, metavar="OUT", help="write rows and head table as strict JSON")
    fmt.add_argument("--csv", type=Path, metavar="OUT", help="write the rows as CSV (the head table beside it)")
    add_model_arg(co)

    le = sub.add_parser("lesson", help="a published 3-dimensional worked example of masked self-attention, recomputed")
    le.add_argument("--json", action="store_true")

    fam = sub.add_parser(
        "import",
        help="convert a transformers encoder-decoder directory: Marian, BART, mBART, M2M100 / NLLB or T5 (from its "
        "config.json)",
    )
    fam.add_argument("hf_dir", type=Path)
    fam.add_argument("out_dir", type=Path)
    fam.add_argument("--src-lang", help="source language code (mBART-50 en_XX, M2M100 en, NLLB eng_Latn)")
    fam.add_argument("--tgt-lang", help="target language code, forced as the first generated token (fr_XX, fra_Latn)")

    im = sub.add_parser("import-marian", help="convert a transformers MarianMTModel directory")
    im.add_argument("hf_dir", type=Path)
    im.add_argument("out_dir", type=Path)

    ex = sub.add_parser("export-marian", help="write a model directory as a transformers MarianMTModel")
    ex.add_argument("model_dir", type=Path)
    ex.add_argument("hf_dir", type=Path)
    return ap


def options(a: argparse.Namespace) -> DecodeOptions:
    """The decoding the arguments ask for; no decoding flag gives ``DecodeOptions()`` itself (DecodeOptions checks
    the beam width)."""
    if not math.isfinite(a.length_penalty):
        raise ValueError(f"length penalty must be a finite number, not {a.length_penalty}")
    if not SEED_RANGE[0] <= a.seed <= SEED_RANGE[1]:
        raise ValueError(f"seed must be between {SEED_RANGE[0]} and {SEED_RANGE[1]}, not {a.seed}")
    if a.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, not {a.batch_size}")
    d = DecodeOptions()
    strategy = "sample" if a.sample else d.strategy if a.beam is None else "beam" if a.beam != 1 else "greedy"
    return DecodeOptions(
        strategy=strategy,
        beam=d.beam if a.beam is None else a.beam,
        length_penalty=a.length_penalty,
        temperature=a.temperature,
        top_k=a.top_k,
        top_p=a.top_p,
        seed=a.seed,
        max_len=d.max_len if a.max_len is None else a.max_len,
    )


def note(msg: str) -> None:
    print(f"note: {msg}", file=sys.stderr)


def check_utf8(text: str, what: str) -> None:
    """Undecodable bytes in argv arrive as lone surrogates, which the tokenizer cannot take."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid UTF-8 text") from None


def source_ids(tokenizer: Tokenizer, cfg: ModelConfig, text: str, where: str = "TEXT") -> list[int]:
    ids = tokenizer.encode(text)
    if len(ids) > cfg.max_len - 1:
        note(
            f"{where} has {len(ids)} tokens but this model reads at most {cfg.max_len - 1}; "
            f"only the first {cfg.max_len - 1} are used"
        )
    return read_source(ids, cfg)[0]


def result_json(lm: LoadedModel, text: str, res: DecodeResult) -> dict:
    tok, eos = lm.tokenizer, lm.cfg.eos_id
    return {
        "source": text,
        "translation": tok.decode(res.ids),
        "tokens": tok.tokens(res.ids),
        "ids": list(res.ids),
        "candidates": [
            {
                "translation": tok.decode(h.ids),
                "tokens": tok.tokens(h.ids),
                "score": h.score,
                "logprob": h.logprob,
                "finished": bool(h.ids) and h.ids[-1] == eos,
            }
            for h in res.n_best
        ],
    }


def cmd_translate(a: argparse.Namespace) -> int:
    if (a.text is None) == (a.input is None):
        raise ValueError("give either TEXT or --input FILE")
    opts = options(a)
    lm = load_model_dir(a.model, a.device)
    if a.text is not None:
        set_threads(2, single_row=opts.strategy != "beam")  # one sentence, one row per step
        lines = [a.text]
    else:
        src = sys.stdin if a.input == "-" else open(a.input, encoding="utf-8")  # noqa: SIM115
        try:
            with src:
                lines = [line.rstrip("\n") for line in src]
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{a.input} is not valid UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})"
            ) from None
    if a.text is not None and not a.text.strip():
        raise ValueError("nothing to translate: the text is empty")
    where = [f"line {i + 1}" for i in range(len(lines))] if a.text is None else ["TEXT"]
    for w, line in zip(where, lines):
        check_utf8(line, w)
    cfg, tok = lm.cfg, lm.tokenizer
    if a.max_len is not None and a.max_len > cfg.max_len - 1:
        note(f"--max-len {opts.max_len} is more than this model's limit; using {cfg.max_len - 1}")
    if opts.strategy == "greedy" and a.text is None:
        lean = step_decoder(lm.model, rows=min(max(a.batch_size, 1), len(lines)))  # built once for every batch
        outputs: list = [None] * len(lines)
        todo = [i for i, line in enumerate(lines) if line.strip()]
        srcs = [source_ids(tok, cfg, lines[i], where[i]) for i in todo]
        for chunk in length_batches(srcs, a.batch_size):
            for j, ids in zip(chunk, greedy_batch(lm.model, [srcs[j] for j in chunk], opts.max_len, lean)):
                outputs[todo[j]] = ids
        for line, ids in zip(lines, outputs):
            ids = ids or []
            if a.json:
                print(dumps({"source": line, "translation": tok.decode(ids), "tokens": tok.tokens(ids)}))
            else:
                print(tok.decode(ids))
        return 0
    lean = step_decoder(lm.model, rows=opts.beam if opts.strategy == "beam" else 1)
    for w, line in zip(where, lines):
        if not line.strip():
            print(dumps({"source": line, "translation": "", "tokens": []}) if a.json else "")
            continue
        res = decode(lm.model, source_ids(tok, cfg, line, w), opts, lean)
        print(dumps(result_json(lm, line, res)) if a.json else tok.decode(res.ids))
    return 0


def cmd_trace(a: argparse.Namespace) -> int:
    from model.decode.trace import teacher_forced_trace

    if not a.text.strip():
        raise ValueError("nothing to trace: the text is empty")
    check_utf8(a.text, "TEXT")
    check_utf8(a.target or "", "--target")
    lm = load_model_dir(a.model, a.device)
    trace = teacher_forced_trace(lm.model, lm.tokenizer, a.text, a.target, causal=not a.no_mask)
    if trace.truncated:
        note(f"the source or target was cut to this model's limit of {lm.cfg.max_len - 1} tokens")
    trace.save_npz(a.out)
    loss = float(trace.arrays.loss.mean())
    print(
        f"wrote {len(trace.arrays) + 3} arrays to {a.out} (target {len(trace.label_tokens)} tokens, "
        f"mean loss {loss:.4f}{', causal mask removed' if a.no_mask else ''})"
    )
    return 0


def format_explanation(r: dict) -> str:
    """The report of model.interpret.explain.report as text: a few lines per section, top 3 where arrays hold more."""
    src, labels = [str(t) for t in r[keys.TOKENS_SRC]], [str(t) for t in r[keys.TOKENS_LABEL]]
    inputs = ["<s>", *labels[:-1]]
    lines = [f"translation: {r['translation']}"]
    if "target" in r:
        lines.append(f"target: {r['target']}")
    what = "target" if "target" in r else "translation"
    lines += [
        "",
        f"logit lens (each decoder layer read by the output head: the {what} token's probability and rank, "
        "entropy in nats, top 3):",
    ]
    for t, row in enumerate(position_labels(inputs, labels)):
        lines.append(f"  position {t}: {row}")
        for layer in range(r["lens.top_ids"].shape[0]):
            top = ", ".join(
                f"{tok} {p:.2f}"
                for tok, p in zip(r["lens.top_tokens"][layer, t, :3], r["lens.top_probs"][layer, t, :3])
            )
            p, rank, h = (r[f"lens.{k}"][layer, t] for k in ("chosen_prob", "chosen_rank", "entropy"))
            lines.append(f"    layer {layer}: p {p:.3f}  rank {rank:<5d} H {h:.2f}  top: {top}")
    if "ablation.heads" in r:
        lines += [
            "",
            f"without {r['ablation.heads']} ({r['ablation.mode']} ablation): {r['ablation.translation']}",
            "  loss change per position (teacher-forced): "
            + "  ".join(f"{tok} {d:+.3f}" for tok, d in zip(labels, r["ablation.loss_delta"])),
        ]
    lines += [
        "",
        f"head importance: mean loss increase when one head alone is removed ({r['importance.mode']}; "
        f"loss {float(r['importance.base_loss']):.3f} with every head)",
    ]
    for name in ("self", "cross"):
        m = r[f"importance.{name}"]
        lines.append(f"  {name + '-attention':<16}" + "".join(f"{f'head {h}':>10}" for h in range(m.shape[1])))
        lines += [f"  layer {layer:<10d}" + "".join(f"  {d:+8.3f}" for d in row) for layer, row in enumerate(m)]
    if "attribution.src" in r:
        steps = f", {int(r['attribution.steps'])} steps" if int(r["attribution.steps"]) else ""
        lines += [
            "",
            f"attribution ({r['attribution.method']}{steps}; top source tokens, share of the inputs, "
            f"completeness error): {r['agreement.summary']}",
        ]
        for t, label in enumerate(labels):
            order = np.argsort(-r["attribution.src"][t], kind="stable")[:3]
            top = ", ".join(f"{src[j]} {r['attribution.src'][t, j]:.2f}" for j in order)
            lines.append(f"  {label}: {top}  (completeness {r['attribution.completeness'][t]:.1%})")
    return "\n".join(lines)


def cmd_explain(a: argparse.Namespace) -> int:
    from model.core.ablation import parse_heads
    from model.interpret.explain import ExplainOptions, report

    if not a.text.strip():
        raise ValueError("nothing to explain: the text is empty")
    check_utf8(a.text, "TEXT")
    check_utf8(a.target or "", "--target")
    heads = parse_heads(a.ablate)
    if a.steps is not None and a.steps < 1:
        raise ValueError(f"--steps must be at least 1, not {a.steps}")
    if a.contrast is None and a.position is not None:
        raise ValueError("--position needs --contrast (the alternative token to compare with)")
    if a.contrast is not None:
        if heads or a.method:
            raise ValueError("--contrast explains one choice: leave out --ablate and --method")
        return explain_contrast(a)
    lm = load_model_dir(a.model, a.device)
    cfg, tok = lm.cfg, lm.tokenizer
    target = None
    if a.target is not None:
        target = tok.encode(a.target)
        if len(target) > cfg.max_len - 1:
            note(
                f"--target has {len(target)} tokens but this model reads at most {cfg.max_len - 1}; "
                f"only the first {cfg.max_len - 1} are used"
            )
    opts = ExplainOptions(heads, a.mode, a.method, a.steps)
    r = report(lm.model, tok, source_ids(tok, cfg, a.text), target, opts)
    return emit(a, r, format_explanation)


def _target_ids(lm, source: list[int], target: str | None) -> list[int]:
    """The teacher-forced output: --target's tokens and </s>, or the model's greedy translation."""
    cfg, tok = lm.cfg, lm.tokenizer
    if target is None:
        return list(decode(lm.model, source, DecodeOptions(max_len=cfg.max_len - 1)).ids)
    check_utf8(target, "--target")
    ids = tok.encode(target)
    if not ids:
        raise ValueError("--target is empty")
    if len(ids) > cfg.max_len - 1:
        note(
            f"--target has {len(ids)} tokens but this model reads at most {cfg.max_len - 1}; "
            f"only the first {cfg.max_len - 1} are used"
        )
    return prepare_ids(ids, cfg.eos_id, cfg.max_len, cfg.forced_bos_id)  # as decode gives it: its code first


def _position(lm, position: int | None, out: list[int]) -> None:
    if position is not None and not 0 <= position < len(out):
        shown = " ".join(lm.tokenizer.tokens(out))
        raise ValueError(f"--position {position} is beyond the output: it has positions 0 to {len(out) - 1} ({shown})")


def _contrast(lm, text: str):
    from model.interpret.contrast import contrast_token

    check_utf8(text, "--contrast")
    c = contrast_token(lm.tokenizer, text)
    if c.note:
        note(c.note)
    return c


def format_contrast(r: dict) -> str:
    t, x, y = int(r["contrast.position"]), str(r["contrast.chosen"]), str(r["contrast.alternative"])
    reads = [str(s) for s in r[keys.TOKENS_DEC_INPUT]]
    src = [str(s) for s in r[keys.TOKENS_SRC]]
    lines = [
        f"position {t} (reads {reads[-1]}): why {x} rather than {y}? logit difference "
        f"{float(r['contrast.logit_diff']):+.3f}",
        "",
        "logit lens of the difference (each decoder layer's output read by the output head):",
    ]
    for layer, (d, px, py) in enumerate(zip(r["lens.diff"], r["lens.p_chosen"], r["lens.p_alternative"])):
        lines.append(f"  layer {layer}: {d:+.3f}   p({x}) {px:.3f}  p({y}) {py:.3f}")
    for m, name in (("ig", "integrated gradients"), ("ixg", "input × gradient")):
        raw = np.concatenate([r[f"attribution.{m}.raw_src"], r[f"attribution.{m}.raw_tgt"]])
        labels = [f"source {s}" for s in src] + [f"target {s}" for s in reads]
        top = np.argsort(-np.abs(raw), kind="stable")[:5]
        steps = int(r[f"attribution.{m}.steps"])
        unit = "path points (trapezoid rule)" if bool(r[f"attribution.{m}.refined"]) else "steps"
        extra = f", {steps} {unit}, completeness error {float(r[f'attribution.{m}.completeness']):.1%}" if steps else ""
        lines += ["", f"attribution ({name}{extra}; signed, toward {x} when positive):"]
        lines += [f"  {labels[j]:<24} {raw[j]:+.3f}" for j in top]
    lines += [
        "",
        f"patching on the difference ({r['patching.corruption']}): clean {float(r['patching.clean']):+.3f},"
        f" corrupted {float(r['patching.corrupted']):+.3f}",
    ]
    lines += _top_sites(r["patching.enc"], r["patching.dec"], r["patching.heads"], src, reads)
    return "\n".join(lines)


def _top_sites(enc, dec, heads, src, reads, k: int = 5) -> list[str]:
    from model.interpret.patching import SUBLAYER_LABELS, SUBLAYERS

    sites = [(v, f"encoder layer {l_} at {src[s]}") for (l_, s), v in np.ndenumerate(enc)]
    sites += [
        (v, f"decoder layer {l_} {SUBLAYER_LABELS[SUBLAYERS[j]]} at position {p} ({reads[p]})")
        for (l_, j, p), v in np.ndenumerate(dec)
    ]
    sites += [
        (v, f"decoder layer {l_} {('self', 'cross')[j]}-attention head {h}") for (j, l_, h), v in np.ndenumerate(heads)
    ]
    return [f"  {v:+.3f}  {name}" for v, name in sorted(sites, key=lambda s: -s[0])[:k]]


def format_patching(r: dict) -> str:
    from model.interpret.patching import SUBLAYERS

    src, reads = [str(s) for s in r[keys.TOKENS_SRC]], [str(s) for s in r[keys.TOKENS_DEC_INPUT]]
    t, x = int(r["position"]), str(r["target"])
    lines = [
        f"corrupted run: {r['corruption.text']}",
        f"position {t} (reads {reads[-1]}), p({x}): clean "
        f"{float(r['prob.clean']):.3f}, corrupted {float(r['prob.corrupted']):.3f}",
    ]
    for name, what in (("prob", f"p({x})"), ("diff", f"logit {x} − logit {r.get('contrast', '')}")):
        if f"{name}.enc" not in r:
            continue
        lines += [
            "",
            f"{what} with one site restored from the clean run:",
            "  encoder layer × source token:",
            "    " + " ".join(f"{s[:8]:>8}" for s in src),
        ]
        lines += [f"  {l_} " + " ".join(f"{v:8.3f}" for v in row) for l_, row in enumerate(r[f"{name}.enc"])]
        lines += ["  decoder layer, sublayer × position:", "    " + " ".join(f"{s[:8]:>8}" for s in reads)]
        for l_, layer in enumerate(r[f"{name}.dec"]):
            lines += [f"  {l_} {SUBLAYERS[j]:<5} " + " ".join(f"{v:8.3f}" for v in row) for j, row in enumerate(layer)]
        lines.append(
            "  heads (layer × head): "
            + "; ".join(
                f"{kind} " + " | ".join(" ".join(f"{v:.3f}" for v in row) for row in r[f"{name}.heads"][j])
                for j, kind in enumerate(("self", "cross"))
            )
        )
        lines += ["  largest:"] + _top_sites(r[f"{name}.enc"], r[f"{name}.dec"], r[f"{name}.heads"], src, reads)
    return "\n".join(lines)


def cmd_patch(a: argparse.Namespace) -> int:
    from model.interpret.patching import Patcher, default_position, report

    if not a.a.strip():
        raise ValueError("nothing to patch: A is empty")
    check_utf8(a.a, "A")
    if a.noise and a.b is not None:
        raise ValueError("give either B or --noise, not both")
    if not a.noise and a.b is None:
        raise ValueError("give a second sentence B of A's token length, or --noise to corrupt A with noise")
    if a.b is not None:
        check_utf8(a.b, "B")
        if " ".join(a.b.split()) == " ".join(a.a.split()):
            raise ValueError("A and B are the same sentence: there is nothing to explain")
    lm = load_model_dir(a.model, a.device)
    cfg, tok = lm.cfg, lm.tokenizer
    src_a = source_ids(tok, cfg, a.a, "A")
    src_b = None if a.b is None else source_ids(tok, cfg, a.b, "B")
    if src_b is not None and len(src_b) != len(src_a):
        raise ValueError(
            f"A and B have {len(src_a) - 1} and {len(src_b) - 1} tokens: position-wise patching needs "
            "the same token length; use --noise to corrupt A with noise instead"
        )
    if src_b == src_a:
        raise ValueError("A and B read as the same tokens: there is nothing to explain")
    out = _target_ids(lm, src_a, a.target)
    _position(lm, a.position, out)
    contrast = None if a.contrast is None else _contrast(lm, a.contrast)
    p = Patcher(lm.model, src_a, out, src_b)
    t = default_position(p) if a.position is None else a.position
    if contrast is not None and contrast.id == out[t]:
        raise ValueError(
            f"the contrast {contrast.token} is the token chosen at position {t}: there is nothing to compare"
        )
    return emit(a, report(tok, p, p.map(t, None if contrast is None else contrast.id)), format_patching)


def explain_contrast(a: argparse.Namespace) -> int:
    from model.interpret.contrast import report

    lm = load_model_dir(a.model, a.device)
    cfg, tok = lm.cfg, lm.tokenizer
    src = source_ids(tok, cfg, a.text)
    out = _target_ids(lm, src, a.target)
    _position(lm, a.position, out)
    contrast = _contrast(lm, a.contrast)
    if a.position is not None and contrast.id == out[a.position]:
        raise ValueError(
            f"the contrast {contrast.token} is the token chosen at position {a.position}: there is nothing to compare"
        )
    return emit(a, report(lm.model, tok, src, out, contrast, a.position, a.steps), format_contrast)


def emit(a: argparse.Namespace, r: dict, as_text: Callable[[dict], str]) -> int:
    """A report as ``--out`` NPZ, ``--json`` (strict) or text."""
    if a.out is not None:
        np.savez_compressed(a.out, **r)
        print(f"wrote {len(r)} arrays to {a.out}")
    elif a.json:
        print(dumps(r))
    else:
        print(as_text(r))
    return 0


def cmd_corpus(a: argparse.Namespace) -> int:
    from model.core.jsonio import write
    from model.interpret import lexicon
    from model.interpret.corpus import (
        analyse,
        flags_text,
        precision_note,
        read_corpus,
        report,
        sentences,
        write_csv,
    )
    from model.interpret.runs import decoding

    if a.limit is not None and a.limit < 1:
        raise ValueError(f"--limit must be at least 1, not {a.limit}")
    if a.head_sentences < 1:
        raise ValueError(f"--head-sentences must be at least 1, not {a.head_sentences}")
    opts = decoding(1 if a.beam is None else a.beam)
    corpus = read_corpus(a.file.read_bytes(), a.file.name, None if a.refs is None else a.refs.read_bytes())
    if a.limit is not None:
        refs = None if corpus.references is None else corpus.references[: a.limit]
        domains = None if corpus.domains is None else corpus.domains[: a.limit]
        corpus = type(corpus)(corpus.sources[: a.limit], refs, corpus.skipped, corpus.notes, domains)
    for msg in corpus.notes:
        note(msg)
    note(corpus.summary())
    if (a.versus_beam is not None or a.versus_model is not None) and corpus.references is None:
        raise ValueError("comparing two runs needs references (a TSV, a CSV with a french column, or --refs)")
    lm = load_model_dir(a.model)
    res = analyse(
        lm.model,
        lm.tokenizer,
        corpus,
        opts,
        heads=0 if a.no_heads else a.head_sentences,
        lexicon=lexicon.of_model(lm.path),
    )
    r = report(res, corpus, opts, lm.path.name)
    if a.json is not None:
        write(a.json, r)
    elif a.csv is not None:
        with open(a.csv, "w", newline="", encoding="utf-8") as f:
            write_csv(r["rows"], f)
        if "heads" in r:
            with open(a.csv.with_suffix(".heads.csv"), "w", newline="", encoding="utf-8") as f:
                write_csv(r["heads"]["rows"], f)
    flagged = sum(bool(row["flags"]) for row in r["rows"])
    print(f"{sentences(len(r['rows']))} analysed, {flagged:,} flagged", end="")
    if "heads" in r:
        print(f"; head table over the first {r['heads']['sentences']:,}", end="")
    print(f" ({', '.join(f'{k} {v:.1f} s' for k, v in res.seconds.items())})")
    if "heads" in r and (said := precision_note(r["heads"]["precision"])):
        print(said)
    print_summary(r)
    if a.versus_beam is not None or a.versus_model is not None:
        r["versus"] = versus(a, lm, corpus, opts, [row["translation"] for row in r["rows"]])
        if a.json is not None:
            write(a.json, r)
    if a.json is None and a.csv is None:
        for row in r["rows"]:
            print(f"{row['index']}\t{row['translation']}\t{flags_text(row)}")
    return 0


def print_summary(r: dict) -> None:
    """The corpus scores with their interval and signature, the flag counts, the correlations and the slices."""
    from model.interpret.corpus import BOOTSTRAP, SIGNALS, lexicon_note

    for name, sc in (r["corpus"] or {}).items():
        print(
            f"{name.upper() if name == 'bleu' else 'chrF'} {sc['score']:.2f}, 95 % bootstrap interval "
            f"{sc['low']:.2f}–{sc['high']:.2f} (percentiles of {BOOTSTRAP:,} resamples; sacrebleu's mean ± ci "
            f"{sc['mean']:.2f} ± {sc['ci']:.2f})  "
            f"{sc['signature']}"
        )
    print("flags: " + ", ".join(f"{f} {n:,}" for f, n in r["flag_counts"].items()))
    print(lexicon_note(r["lexicon"]))
    if r["correlations"]:
        rho = ", ".join(
            f"{SIGNALS[k]} {v:+.2f}" if v is not None and math.isfinite(v) else f"{SIGNALS[k]} undefined"
            for k, v in r["correlations"].items()
        )
        print(f"Spearman ρ with sentence chrF: {rho}")
        if "undefined" in rho:
            print("(undefined: fewer than 3 sentences have a value, or they all have the same, or the same chrF)")
    print("slices (sentences, BLEU, chrF, share flagged):")
    for sl in r["slices"]:
        scores = "" if sl["chrf"] is None else f", BLEU {sl['bleu']:.1f}, chrF {sl['chrf']:.1f}"
        flagged = "" if sl["flagged"] is None else f", {sl['flagged']:.0%} flagged"
        print(f"  by {sl['by']}: {sl['slice']}: {sl['sentences']:,}{scores}{flagged}")


def versus(a: argparse.Namespace, lm: LoadedModel, corpus: Corpus, opts: DecodeOptions, first: list[str]) -> dict:
    """The second run of ``corpus`` (``--versus-beam`` or ``--versus-model``) against the first (its translations
    ``first``): printed, and returned for the JSON."""
    from model.interpret.runs import beam_of, decoding, run_names, second_run

    assert corpus.references is not None  # a second run is refused before the first without references
    other = lm if a.versus_model is None else load_model_dir(a.versus_model)
    opts_b = decoding(a.versus_beam if a.versus_beam is not None else beam_of(opts))
    names = run_names((opts, lm.path.name), (opts_b, other.path.name))
    out = second_run(other.model, other.tokenizer, corpus.sources, corpus.references, first, opts_b, names)
    print(
        f"{names[1]} against {names[0]} ({out['seconds']:.1f} s; paired bootstrap, {out['bootstrap']:,} "
        f"resamples): chrF better on {out['better']:,} sentences, worse on {out['worse']:,}"
    )
    for key, label in (("bleu", "BLEU"), ("chrf", "chrF")):
        c = out["corpus"][key]
        print(
            f"  {label} {c[names[0]]:.2f} → {c[names[1]]:.2f} ({c['difference']:+.2f}, p = {c['p_value']:.4f})  "
            f"{c['signature']}"
        )
    for ch in out["changed_most"]:
        print(f"  #{ch['index']} chrF {ch['chrf'][0]:.1f} → {ch['chrf'][1]:.1f}: {ch[names[0]]} ⇒ {ch[names[1]]}")
    return out


def cmd_lesson(a: argparse.Namespace) -> int:
    from model.lesson.lesson import build_lesson, format_lesson

    lesson = build_lesson()
    print(dumps(lesson.to_dict(), indent=1) if a.json else format_lesson(lesson))
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from model.io.marian import import_marian

    print(f"imported into {import_marian(a.hf_dir, a.out_dir)}")
    return 0


def cmd_import_family(a: argparse.Namespace) -> int:
    from model.io.family import import_model

    out = import_model(a.hf_dir, a.out_dir, a.src_lang, a.tgt_lang)
    print(f"imported into {out}")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from model.io.marian import export_marian

    print(f"exported to {export_marian(a.model_dir, a.hf_dir)}")
    return 0


COMMANDS = {
    "translate": cmd_translate,
    "trace": cmd_trace,
    "explain": cmd_explain,
    "patch": cmd_patch,
    "corpus": cmd_corpus,
    "lesson": cmd_lesson,
    "import": cmd_import_family,
    "import-marian": cmd_import,
    "export-marian": cmd_export,
}


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    set_threads(2)
    try:
        return COMMANDS[a.command](a)
    except (ModelDirError, ValueError, OSError, ImportError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
