"""The bad-input matrix: cases, and their checks through the command line and through the app (AppTest).

Each case must end in a clear message or a sane clamp: never a traceback, never a hang, and the app
must still translate "I am a student." afterwards. ``benchmarks/bad_inputs.py`` prints the matrix for
any model; ``tests/views/test_bad_inputs.py`` runs every case on the tests' tiny model.

CLI: ``run_cli_inprocess`` runs ``model.cli.main(argv)`` in this process under a SIGALRM watchdog
(``python -m model`` spends most of its start-up importing torch); the cases that need a real process
(undecodable bytes in argv) run ``python -m model`` as a subprocess. A case passes on exit 0, or on
exit 2 with a one-line ``error:`` message; notes about clamped values go to stderr as ``note:`` lines.

App: cases that only change the text run in one shared AppTest session (typed into the widgets);
decoding parameters arrive through the URL (the only way to send out-of-range values: the widgets
are bounded); damaged model directories get a fresh session each. The URL also sets ``max_len=8``
(unless the case is about max length) so each run stays short.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "views" / "main.py")
NORMAL = "I am a student."
URL_KEYS = {
    "strategy": "strategy",
    "beam": "beam",
    "temperature": "temp",
    "top_k": "top_k",
    "top_p": "top_p",
    "seed": "seed",
    "max_len": "max_len",
    "length_penalty": "lp",
}
# every key set on every case, so no case inherits another's value; short decodes keep each run fast
URL_DEFAULTS = {
    "strategy": "greedy",
    "beam": "4",
    "temp": "1",
    "top_k": "0",
    "top_p": "1",
    "seed": "0",
    "max_len": "8",
    "lp": "1",
}
CLI_FLAGS = {
    "beam": "--beam",
    "temperature": "--temperature",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "seed": "--seed",
    "max_len": "--max-len",
    "length_penalty": "--length-penalty",
}
HTML = "<script>alert(1)</script><img src=x onerror=alert(1)> & </textarea>"
MARKDOWN = r"# T **b** [x](javascript:f()) `c` $\frac{a}{b}$ :red[r]"


@dataclass(frozen=True)
class Case:
    """One bad input. ``cli``/``app``: (expected outcome, text the message must contain); None = n/a.

    CLI outcomes: "ok" (exit 0), "note" (exit 0 and a ``note:`` line on stderr), "error" (exit 2, one
    ``error:`` line). App outcomes: "ok", "warning", "info", "error" (st.error, only for broken models).
    """

    name: str
    text: str | None = NORMAL
    reference: str | None = None  # CLI: ``trace TEXT --target REF``; app: the reference box
    params: dict = field(default_factory=dict)  # decoding parameters, app names (strategy, beam, ...)
    cli_extra: tuple = ()  # more CLI arguments (CLI-only options)
    damage: str | None = None  # what to break in a copy of the model directory
    cli: tuple[str, str] | None = ("ok", "")
    app: tuple[str, str] | None = ("ok", "")
    same_as_greedy: bool = False  # the CLI output must equal plain greedy decoding of the same text
    subprocess_only: bool = False  # needs a real process (bytes in argv)
    smoke: bool = False


# The cases are a table, one case to a line or two, as it reads best (fmt: off keeps it so).
# fmt: off
CASES: tuple[Case, ...] = (
    Case("empty text", "", cli=("error", "empty"), app=("info", "empty")),
    Case("spaces only", "     ", cli=("error", "empty"), app=("info", "empty")),
    Case("newlines only", "\n\n\n", cli=("error", "empty"), app=("info", "empty"), smoke=True),
    Case("10,000 characters", ("The cat is sleeping on the sofa. " * 304)[:10_000], cli=("note", "only the first"),
         app=("warning", "longer than 2000 characters")),
    Case("one 500-character word", "Supercalifragilistic" * 25, cli=("note", "only the first"),
         app=("warning", "only the first")),
    Case("1,000 tokens", "cat " * 1000, cli=("note", "only the first"), app=("warning", "only the first"),
         smoke=True),
    Case("emoji", "I love 🍕🎉😀 and 👨‍👩‍👧‍👦!"),
    Case("CJK", "我是学生。日本語のテキスト、한국어", app=("warning", "cannot read this text")),
    Case("Arabic (RTL) + RLO", "أنا طالب \u202eI am a student.\u202c"),
    Case("zero-width + control chars", "I\u200b am\u200d a\u2060 stu\ufeffdent\x07\x1b[31m.\x08\r\x7f"),
    Case("zero-width only", "\u200b\u200c\u200d"),
    Case("NUL byte", "I am\x00 a student.\x00"),
    Case("HTML <script>/<img onerror>", HTML, smoke=True),
    Case("Markdown/LaTeX syntax", MARKDOWN),
    Case("URL", "https://example.com/a?b=c&d=%3Cx%3E#frag"),
    Case("numbers only", "3.14159 42 1,000,000 -7e10 0x1F"),
    Case("reference longer than the limit", reference="Je suis étudiant. " * 100, cli=("note", "cut"),
         app=("warning", "reference was cut")),
    Case("reference with HTML", reference=HTML),
    Case("beam 0", params={"strategy": "beam", "beam": 0}, cli=("error", "beam width"),
         app=("warning", "beam width must be between 1 and 8; using 1")),
    Case("beam 1", params={"strategy": "beam", "beam": 1}, same_as_greedy=True),
    Case("beam 64", params={"strategy": "beam", "beam": 64}, cli=("error", "beam width must be between 1 and 8"),
         app=("warning", "beam width must be between 1 and 8; using 8")),
    Case("beam 100000", params={"strategy": "beam", "beam": 100_000}, cli=("error", "beam width"),
         app=("warning", "using 8"), smoke=True),
    Case("beam 'abc'", params={"strategy": "beam", "beam": "abc"}, cli=("error", "invalid int value"),
         app=("warning", "not a number")),
    Case("temperature 0", params={"strategy": "sample", "temperature": 0}, same_as_greedy=True,
         app=("warning", "temperature 0 makes sampling greedy")),
    Case("temperature 1e-6", params={"strategy": "sample", "temperature": 1e-6}, same_as_greedy=True),
    Case("temperature 100", params={"strategy": "sample", "temperature": 100},
         app=("warning", "temperature must be between 0.0 and 5.0; using 5.0")),
    Case("temperature nan", params={"strategy": "sample", "temperature": "nan"}, cli=("error", "temperature"),
         app=("warning", "not a number")),
    Case("top-p 0", params={"strategy": "sample", "top_p": 0}, same_as_greedy=True),
    Case("top-p 1", params={"strategy": "sample", "top_p": 1}),
    Case("top-p 2", params={"strategy": "sample", "top_p": 2}, cli=("error", "top_p"),
         app=("warning", "top-p must be between")),
    Case("top-k 0", params={"strategy": "sample", "top_k": 0}),
    Case("top-k -1", params={"strategy": "sample", "top_k": -1}, cli=("error", "top_k"),
         app=("warning", "top-k must be between")),
    Case("seed 2**70", params={"strategy": "sample", "seed": 2**70}, cli=("error", "seed must be between"),
         app=("warning", "seed must be between")),
    Case("max length 0", params={"max_len": 0}, cli=("error", "max_len"),
         app=("warning", "max length must be between 1")),
    Case("max length 10,000", params={"max_len": 10_000}, cli=("note", "--max-len 10000 is more than"),
         app=("warning", "max length must be between 1"), smoke=True),
    Case("length penalty nan", params={"strategy": "beam", "beam": 3, "length_penalty": "nan"},
         cli=("error", "length penalty"), app=("warning", "not a number")),
    Case("--batch-size 0", None, cli_extra=("--input", "@lines", "--batch-size", "0"), cli=("error", "batch-size"),
         app=None),
    Case("--input file not UTF-8", None, cli_extra=("--input", "@latin1"), cli=("error", "not valid UTF-8"),
         app=None),
    Case("undecodable bytes in argv", "I am \udcff a student.", cli=("error", "not valid UTF-8"), app=None,
         subprocess_only=True),
    Case("model directory missing", damage="no_dir", cli=("error", "does not exist"),
         app=("error", "does not exist")),
    Case("model.safetensors missing", damage="missing_weights", cli=("error", "model.safetensors is missing"),
         app=("error", "model.safetensors is missing"), smoke=True),
    Case("model.safetensors truncated", damage="truncated_weights", cli=("error", "model.safetensors"),
         app=("error", "truncated")),
    Case("config.json corrupt", damage="bad_config", cli=("error", "config.json"), app=("error", "config.json")),
    Case("tokenizer.json corrupt", damage="bad_tokenizer", cli=("error", "tokenizer.json"),
         app=("error", "tokenizer.json")),
    Case("tokenizer.json missing", damage="missing_tokenizer", cli=("error", "tokenizer.json is missing"),
         app=("error", "tokenizer.json is missing")),
)
# The model-directory section: a copy of the model with one size, tensor or byte range wrong. Each must be refused
# before anything big is allocated, in one sentence naming the field or tensor. FFN_W1 and its shape are the tests'
# tiny model's (d_ff 64 × d_model 32); on another model the shape cases name whichever tensor differs first.
FFN_W1 = "decoder_layers.0.ffn.W_1.weight"
MODEL_DIR_CASES = tuple(
    Case(name, damage=damage, cli=("error", needle), app=("error", needle), smoke=smoke)
    for name, damage, needle, smoke in (
        ("config: vocab_size 0", "config:vocab_size=0", "vocab_size=0", False),
        ("config: vocab_size doubled", "config:vocab_size*2", "embed.weight has shape", True),
        ("config: vocab_size 1,000,000", "config:vocab_size=1000000", "embed.weight has shape", False),
        ("config: d_model doubled", "config:d_model*2", "embed.weight has shape", False),
        ("config: absurd d_model 65536", "config:d_model=65536", "d_model=65536", False),
        ("config: one more decoder layer", "config:n_decoder_layers+1", "missing (decoder_layers.", False),
        ("config: one encoder layer fewer", "config:n_encoder_layers-1", "unexpected tensor", False),
        ("config: 0 decoder layers", "config:n_decoder_layers=0", "n_decoder_layers=0", False),
        ("config: d_ff doubled", "config:d_ff*2", "ffn.W_1.weight has shape", False),
        ("config: n_heads does not divide d_model", "config:n_heads=5", "not divisible by n_heads=5", False),
        ("config: max_len -1", "config:max_len=-1", "max_len=-1", False),
        ("config: pad_id outside the vocabulary", "config:pad_id=100000", "pad_id=100000", False),
        ("config: d_model a string", "config:d_model='32'", "d_model must be a whole number", False),
        ("config: dropout NaN", "config:dropout=nan", "dropout must be a finite number", False),
        ("weights: one tensor transposed", "weights:transpose", FFN_W1, True),
        ("weights: one tensor the wrong size", "weights:shrink", FFN_W1, False),
        ("weights: int32 tensor", "weights:int32", f"stores {FFN_W1} as I32", False),
        ("weights: NaN in a tensor", "weights:nan", f"non-finite values (NaN or infinity) in {FFN_W1}", True),
        ("weights: Inf in a tensor", "weights:inf", f"non-finite values (NaN or infinity) in {FFN_W1}", False),
        ("weights: a tensor missing", "weights:drop", f"1 tensor missing ({FFN_W1})", False),
        ("weights: an extra tensor", "weights:extra", "1 unexpected tensor (extra.weight)", False),
        ("weights: header length beyond the file", "header:length", "header length field says", False),
        ("weights: header not JSON", "header:garbage", "are not valid JSON", False),
        ("weights: offsets beyond the file", "header:offsets", "lies beyond the end", False),
        ("weights: 5-byte file", "header:short", "too short to be a safetensors file", False),
        ("model path is a file", "path_is_file", "is a file, not a model directory", False),
    )
)
CASES += MODEL_DIR_CASES
# fmt: on


# ------------------------------------------------------------------------------------------- set-up


def _edit_config(d: Path, edit: str) -> None:
    """``key=value`` (a Python literal; ``nan`` for NaN) or ``key*2``, ``key+1``, ``key-1`` on config.json."""
    cfg = json.loads((d / "config.json").read_text())
    m = re.fullmatch(r"(\w+)([=*+-])(.+)", edit)
    if m is None:
        raise ValueError(f"not a config edit: {edit!r}")
    key, op, value = m.groups()
    if op == "=":
        cfg[key] = float("nan") if value == "nan" else ast.literal_eval(value)
    else:
        n = int(value)
        cfg[key] = cfg[key] * n if op == "*" else cfg[key] + n if op == "+" else cfg[key] - n
    (d / "config.json").write_text(json.dumps(cfg))  # NaN written as Python's json writes it: a corrupt file


def _edit_weights(d: Path, edit: str) -> None:
    """One tensor (``FFN_W1``) transposed, cut, made int32, NaN or Inf, dropped; or an extra tensor added."""
    import torch
    from safetensors.torch import load_file, save_file

    w = d / "model.safetensors"
    state = load_file(str(w))
    t = state[FFN_W1]
    if edit == "transpose":
        state[FFN_W1] = t.T.contiguous()
    elif edit == "shrink":
        state[FFN_W1] = t[:-1].contiguous()
    elif edit == "int32":
        state[FFN_W1] = t.to(torch.int32)
    elif edit in ("nan", "inf"):
        t = t.clone()
        t[0, 0] = float(edit)
        state[FFN_W1] = t
    elif edit == "drop":
        del state[FFN_W1]
    elif edit == "extra":
        state["extra.weight"] = torch.zeros(3, 3)
    else:
        raise ValueError(f"unknown weight damage {edit!r}")
    save_file(state, str(w))


def _damage_header(d: Path, edit: str) -> None:
    """The 8-byte length or the JSON header of model.safetensors broken (the tensors' bytes left as they are)."""
    w = d / "model.safetensors"
    data = w.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header, body = data[8 : 8 + n], data[8 + n :]
    if edit == "length":
        data = struct.pack("<Q", len(data) * 4) + data[8:]
    elif edit == "garbage":
        data = data[:8] + b"{not json" + b" " * (n - 9) + body
    elif edit == "offsets":
        h = json.loads(header)
        h[FFN_W1]["data_offsets"] = [h[FFN_W1]["data_offsets"][0], len(body) + 4096]
        raw = json.dumps(h).encode()
        data = struct.pack("<Q", len(raw)) + raw + body
    elif edit == "short":
        data = data[:5]
    else:
        raise ValueError(f"unknown header damage {edit!r}")
    w.write_bytes(data)


def damaged_copy(model_dir: Path, damage: str, work: Path) -> Path:
    """A copy of ``model_dir`` with one file deleted or broken (or no directory at all, or a file in its place).

    ``damage``: a name below, or ``config:EDIT`` (``_edit_config``), ``weights:EDIT`` (``_edit_weights``),
    ``header:EDIT`` (``_damage_header``)."""
    d = work / ("damaged-" + re.sub(r"[^\w.+-]", "_", damage))
    if damage == "no_dir":
        return d
    if damage == "path_is_file":
        d.write_bytes((model_dir / "model.safetensors").read_bytes()[:64])
        return d
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(model_dir, d)
    kind, _, edit = damage.partition(":")
    if kind == "config":
        _edit_config(d, edit)
        return d
    if kind == "weights":
        _edit_weights(d, edit)
        return d
    if kind == "header":
        _damage_header(d, edit)
        return d
    if damage == "missing_weights":
        (d / "model.safetensors").unlink()
    elif damage == "truncated_weights":
        data = (d / "model.safetensors").read_bytes()
        (d / "model.safetensors").write_bytes(data[: len(data) // 3])
    elif damage == "bad_config":
        (d / "config.json").write_text('{"vocab_size": "lots",')
    elif damage == "bad_tokenizer":
        (d / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": [1, 2')
    elif damage == "missing_tokenizer":
        (d / "tokenizer.json").unlink()
    else:
        raise ValueError(f"unknown damage {damage!r}")
    return d


# ------------------------------------------------------------------------------------------- CLI


@dataclass
class Outcome:
    kind: str  # ok | note | error | info | warning | TRACEBACK | HANG | CRASH | n/a
    message: str = ""
    output: str = ""


class Hang(BaseException):
    """Raised by the alarm; a BaseException so no `except Exception` in the code under test swallows it."""


def _alarm(signum, frame):
    raise Hang()


def cli_argv(case: Case, model_dir: Path, work: Path) -> list:
    files = {"@lines": work / "lines.txt", "@latin1": work / "latin1.txt"}
    files["@lines"].write_text(f"{NORMAL}\nHello world.\n", encoding="utf-8")
    files["@latin1"].write_bytes("Je suis étudiant, ça va.\n".encode("latin-1"))
    extra = [str(files.get(a, a)) for a in case.cli_extra]
    p = dict(case.params)
    strategy = p.pop("strategy", "greedy")
    argv: list = ["trace" if case.reference is not None else "translate"]
    if case.text is not None:
        argv.append(case.text)
    if case.reference is not None:
        argv += ["--target", case.reference, "--out", str(work / "trace.npz")]
    if strategy == "sample":
        argv.append("--sample")
    for key, value in p.items():
        argv += [CLI_FLAGS[key], str(value)]
    return [*argv, *extra, "--model", str(model_dir)]


def run_cli_inprocess(argv: list, timeout: float) -> tuple[int | str, str, str]:
    from model.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        # armed inside the try: a short timeout can fire before the first statement of the body
        signal.setitimer(signal.ITIMER_REAL, timeout)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc: int | str = main(argv)
            except SystemExit as e:  # argparse: usage errors exit 2
                rc = e.code if isinstance(e.code, int) else 2
    except Hang:
        rc = "HANG"
    except Exception as e:  # what a user would see as a traceback
        rc = "TRACEBACK"
        err.write(f"Traceback (in-process): {type(e).__name__}: {e}\n")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue()


def run_cli_subprocess(argv: list, timeout: float, work: Path) -> tuple[int | str, str, str]:
    if argv[0] == "translate" and "\x00" in argv[1]:  # argv cannot hold NUL: send it through --input
        (work / "nul.txt").write_text(argv[1] + "\n", encoding="utf-8")
        argv = ["translate", "--input", str(work / "nul.txt"), *argv[2:]]
    args = [os.fsencode(a) if isinstance(a, str) and re.search("[\udc80-\udcff]", a) else a for a in argv]
    try:
        p = subprocess.run([sys.executable, "-m", "model", *args], cwd=ROOT, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "HANG", "", ""
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def classify_cli(rc: int | str, out: str, err: str) -> Outcome:
    """What a CLI run (``rc``: its exit status, or "HANG" / "TRACEBACK") amounts to."""
    lines = [line for line in err.splitlines() if line.strip()]
    if rc == "HANG":
        return Outcome("HANG", "no answer before the timeout")
    if "Traceback" in err or rc == "TRACEBACK":
        return Outcome("TRACEBACK", lines[-1] if lines else "")
    if rc == 0:
        notes = [line for line in lines if line.startswith("note:")]
        if len(notes) != len(lines):
            return Outcome("CRASH", f"exit 0 with stray stderr: {lines[0][:80]}")
        return Outcome("note" if notes else "ok", "; ".join(notes), out)
    if rc == 2 and lines and ": error: " in lines[-1] and lines[0].startswith("usage:"):
        return Outcome("error", lines[-1].split(": error: ", 1)[1])  # argparse: usage line + one error line
    if rc == 2 and len(lines) == 1 and lines[0].startswith("error: "):
        return Outcome("error", lines[0])
    return Outcome("CRASH", f"exit {rc}: {(lines or [''])[-1][:100]}")


def check_cli(case: Case, model_dir: Path, work: Path, timeout: float, use_subprocess: bool) -> tuple[Outcome, str]:
    """(outcome, problem); problem is "" when the case behaved as expected."""
    if case.cli is None:
        return Outcome("n/a"), ""
    if case.damage:
        model_dir = damaged_copy(model_dir, case.damage, work)
    argv = cli_argv(case, model_dir, work)
    sub = use_subprocess or case.subprocess_only
    rc, out, err = run_cli_subprocess(argv, timeout, work) if sub else run_cli_inprocess(argv, timeout)
    got = classify_cli(rc, out, err)
    want, needle = case.cli
    if got.kind != want:
        return got, f"CLI: expected {want}, got {got.kind} ({got.message})"
    if needle not in got.message:
        return got, f"CLI: message {got.message!r} lacks {needle!r}"
    if want != "error" and not got.output.strip():
        return got, "CLI: exit 0 but no output"
    if case.same_as_greedy:
        g_argv = ["translate", case.text, "--model", str(model_dir)]
        g_rc, g_out, _ = run_cli_subprocess(g_argv, timeout, work) if sub else run_cli_inprocess(g_argv, timeout)
        if g_rc != 0 or g_out != got.output:
            return got, f"CLI: output {got.output.strip()[:40]!r} differs from greedy {g_out.strip()[:40]!r}"
    return got, ""


# ------------------------------------------------------------------------------------------- app


MODEL_ATTR = "bad_inputs_model"


def app_test(model_dir: Path, url: dict | None = None, timeout: float = 60) -> Any:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update({**URL_DEFAULTS, **(url or {})})
    on_model(at, model_dir)
    return at


def on_model(at: Any, model_dir: Path) -> None:
    """The model a session's runs read (``run``), kept on the session itself: a broken model's session is given
    a good one to show it still works."""
    setattr(at, MODEL_ATTR, str(model_dir))  # AppTest has no field of its own for it


def run(at: Any) -> Any:
    """Rerun a session on its own model (the app reads $DECODER_LENS_MODEL on every run)."""
    from model.io.checkpoint import ENV_MODEL

    os.environ[ENV_MODEL] = getattr(at, MODEL_ATTR)
    return at.run()


def _values(elements) -> list[str]:
    """Element texts with the app's markdown escaping undone (messages are shown escaped)."""
    return [re.sub(r"\\(.)", r"\1", str(e.value)) for e in elements]


def app_outcome(at: Any) -> Outcome:
    if at.exception:
        return Outcome("TRACEBACK", str(at.exception[0].value).splitlines()[0][:100])
    if at.error:
        return Outcome("error", _values(at.error)[0])
    if at.warning:
        return Outcome("warning", " / ".join(_values(at.warning)))
    if at.info:
        return Outcome("info", " / ".join(_values(at.info)))
    return Outcome("ok")


def unsafe_markdown(at: Any) -> str | None:
    """User text reaches markdown only escaped: an unescaped '<' means raw HTML could render."""
    for m in at.markdown:
        if re.search(r"(?<!\\)<", m.value):
            return m.value[:80]
    return None


# Warnings about the model's output (not about the input): they depend on the model, so a case that expects no
# warning ignores them.
OUTPUT_WARNINGS = ("out of its depth", "cut off at the maximum length", "cannot read this text", "unknown to the model")


def input_warnings(at: Any) -> list[str]:
    return [w for w in _values(at.warning) if not any(o in w for o in OUTPUT_WARNINGS)]


def check_app_case(at: Any, case: Case) -> tuple[Outcome, str]:
    if case.app is None:
        return Outcome("n/a"), ""
    got = app_outcome(at)
    want, needle = case.app
    needle_l = needle.lower()
    if got.kind == "TRACEBACK":
        return got, f"app: exception {got.message}"
    if want == "error":
        hit = any(needle_l in e.lower() for e in _values(at.error))
        return got, "" if hit else f"app: no st.error with {needle!r} ({got.message})"
    if at.error:
        return got, f"app: unexpected st.error {got.message}"
    if want in ("warning", "info"):
        pool = _values(at.warning if want == "warning" else at.info)
        if not any(needle_l in v.lower() for v in pool):
            return got, f"app: no st.{want} with {needle!r} (got {got.kind}: {got.message[:80]})"
        got.kind = want
    elif want == "ok" and (input_warnings(at) or at.info):
        return got, f"app: unexpected {got.kind}: {got.message[:80]}"
    elif want == "ok":
        got.kind = "ok"  # only warnings about the model's output, which the input did not cause
    bad = unsafe_markdown(at)
    if bad:
        return got, f"app: unescaped '<' in markdown: {bad!r}"
    for text in (case.text, case.reference):
        raw = (text or "").strip()[:200]
        if len(raw) > 8 and any(raw in m.value for m in at.markdown):
            return got, f"app: user text reaches markdown unescaped: {raw[:40]!r}"
    if case.text and case.text.strip() and want != "info":
        shown = [str(t.value) for t in at.text]  # st.text: shown verbatim, never escaped
        if not any(s and s in case.text.strip() for s in shown[:1]):
            return got, f"app: the source is not shown as plain text ({shown[:1]!r})"
    return got, ""


def still_usable(at: Any) -> str:
    """Type a normal sentence into the same session: it must translate cleanly."""
    at.text_area(key="source").input(NORMAL)
    if "reference" in [w.key for w in at.text_input]:
        at.text_input(key="reference").input("")
    run(at)
    if at.exception or at.error:
        return f"app afterwards: {app_outcome(at).message}"
    if not any(t.value == NORMAL for t in at.text) or len(at.text) < 2:
        return "app afterwards: no translation shown"
    return ""


def check_app(
    cases: Sequence[Case], model_dir: Path, work: Path, timeout: float = 60, every: bool = True, log: bool = False
) -> dict[str, tuple[Outcome, str]]:
    """Run the app cases; ``every``: check the session still works after each case (else once at the end).

    Every case but the broken models runs in one session: the text goes into the widgets, the
    decoding parameters come through the URL (re-read by clearing ``views.session.LOADED``), all of them set
    so that no case inherits another's values.
    """
    from views.session import LOADED  # the app's flag: the session has read its URL

    results: dict[str, tuple[Outcome, str]] = {}
    shared = None
    for case in cases:
        if case.app is None:
            results[case.name] = (Outcome("n/a"), "")
            continue
        t0 = time.perf_counter()
        try:
            if case.damage:
                at = run(app_test(damaged_copy(model_dir, case.damage, work), timeout=timeout))
                got, problem = check_app_case(at, case)
                if not problem:
                    at.query_params["page"] = "Learn"  # the rest of the app still works: the Learn page
                    run(at)  # says why it has no chapters and still shows the hand-sized worked example
                    if at.exception or not any(h.value == "Common mistakes to avoid" for h in at.subheader):
                        problem = "app afterwards: the Learn page failed"
                if not problem and every:  # and the same session translates once a good model is given
                    on_model(at, model_dir)
                    at.query_params["page"] = "Explore"
                    run(at)
                    problem = still_usable(at)
            else:
                if shared is None:
                    shared = run(app_test(model_dir, timeout=timeout))
                at = shared
                url = {URL_KEYS[k]: str(v) for k, v in case.params.items() if k in URL_KEYS}
                at.query_params = {**URL_DEFAULTS, **url}
                at.session_state[LOADED] = False
                at.text_area(key="source").input(case.text or "")
                at.text_input(key="reference").input(case.reference or "")
                run(at)
                got, problem = check_app_case(at, case)
                if every and not problem:
                    problem = still_usable(at)
        except Exception as e:  # AppTest raises on a script that runs past its timeout
            kind = "HANG" if "timed out" in str(e).lower() or "timeout" in str(e).lower() else "TRACEBACK"
            got, problem = Outcome(kind, str(e)[:100]), f"app: {type(e).__name__}: {str(e)[:100]}"
        results[case.name] = (got, problem)
        if log:
            print(f"app {case.name}: {got.kind} {problem} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    if shared is not None and not every:
        problem = still_usable(shared)
        if problem:
            results["(app afterwards)"] = (Outcome("CRASH", problem), problem)
    return results


# ------------------------------------------------------------------------------------------- matrix


def run_matrix(
    cases: Sequence[Case], model_dir: Path, timeout: float = 120, use_subprocess: bool = False, app_every: bool = True
) -> list[dict]:
    """One row per case: ``case``, ``cli``/``app`` (Outcome) and ``cli_problem``/``app_problem`` ("" = as expected)."""
    with tempfile.TemporaryDirectory(prefix="bad-inputs-") as tmp:
        work = Path(tmp)
        rows: list[dict[str, Any]] = []
        for case in cases:
            t0 = time.perf_counter()
            got, problem = check_cli(case, model_dir, work, timeout, use_subprocess)
            rows.append(dict(case=case.name, cli=got, cli_problem=problem, cli_s=time.perf_counter() - t0))
        app = check_app(cases, model_dir, work, timeout=timeout, every=app_every)
        by_name = {r["case"]: r for r in rows}
        for name, (got, problem) in app.items():
            row = by_name.setdefault(name, dict(case=name, cli=Outcome("n/a"), cli_problem="", cli_s=0.0))
            row.update(app=got, app_problem=problem)
        for row in by_name.values():  # the temporary directory says nothing: drop it from the messages
            for key in ("cli", "app"):
                if key in row:
                    row[key].message = row[key].message.replace(f"{work}/", "")
            for key in ("cli_problem", "app_problem"):
                row[key] = row.get(key, "").replace(f"{work}/", "")
        return list(by_name.values())
