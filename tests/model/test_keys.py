"""The trace's key names live in model/core/keys.py alone: the names it gives are the names a trace holds and the
docs/cli.md lists, and no other module of the product spells a key by hand (an f-string or a literal)."""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from model.core import keys
from model.core.keys import Records
from model.decode.trace import teacher_forced_trace

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("model", "views", "viz", "harness", "benchmarks")
KEY_MODULE = Path("model/core/keys.py")

QUANTITY = "|".join(sorted({q for blocks in keys.BLOCKS.values() for qs in blocks.values() for q in qs}, key=len)[::-1])
BLOCK = r"self|cross|ffn|norm(?:\d|\{\})"
EMBED = "|".join(keys.EMBEDDING)
# a literal that is a key, or the tail of one ("dec.1.cross.weights", "dec.pe", ".norm3.out", "tokens.src")
LITERAL = re.compile(
    rf"(?:enc|dec)\.(?:\d+\.)?(?:{BLOCK})(?:\.(?:{QUANTITY}|\d+))?|(?:enc|dec)\.(?:{EMBED})"
    rf"|\.?(?:{BLOCK})\.(?:{QUANTITY})|tokens\.(?:src|dec_input|label)"
)
# an f-string, its values written {}, that assembles one: a layer's prefix with a value for its number, a value
# followed by a block and quantity, a value followed by a quantity
ASSEMBLED = [
    re.compile(r"(?:enc|dec)\.\{\}"),
    re.compile(rf"(?:^|\.)(?:{BLOCK})\.(?:{QUANTITY}|\{{\}})$"),
    re.compile(rf"\{{\}}\.(?:{BLOCK})(?:\.(?:{QUANTITY}|\{{\}}))?$|\{{\}}\.(?:{QUANTITY}|{EMBED})$"),
]


# The model's own records are one word each ("loss", "probs", "label_ids"), so LITERAL's dotted pattern misses them
# spelled by hand. viz/ holds no trace: its "probs" and "loss" are a figure's own arguments and a table's columns.
WHOLE = {keys.MEMORY, keys.LOGITS, keys.PROBS, keys.LOSS, keys.CAUSAL, keys.SRC_IDS, keys.DEC_INPUT_IDS, keys.LABEL_IDS}
WHOLE_SCANNED = ("model", "views", "harness", "benchmarks")
BLOCK_NAMES = {b for blocks in keys.BLOCKS.values() for b in blocks}
# the Add & Norm blocks' names are nothing but key names; "self", "cross" and "ffn" also name chapters and kinds
NORM_NAMES = {b for b in BLOCK_NAMES if b.startswith("norm")}
# a key function or constant whose value, as the index of a read, is one record: read it through Records instead
RECORD_KEYS = {"embedding", "layer_output", *(k for k in WHOLE if k != keys.CAUSAL)}


def _docstrings(nodes: list[ast.AST]) -> set[int]:
    found = set()
    for node in nodes:
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            found.add(id(body[0].value))
    return found


def _shape(node: ast.JoinedStr) -> str:
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _is_record_key(node: ast.expr) -> bool:
    """``keys.dec(i, block, quantity)`` (a layer's record, not a block), ``keys.embedding(…)``,
    ``keys.layer_output(i)``, ``keys.PROBS`` …: an expression that names one record."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_keys(node.func.value):
        name = node.func.attr
        return (
            name in RECORD_KEYS
            or name in ("dec", "enc")
            and len(node.args) == 3
            or name == "layer"
            and len(node.args) == 4
        )
    return isinstance(node, ast.Attribute) and _is_keys(node.value) and node.attr.lower() in RECORD_KEYS


def _is_keys(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "keys"


def _read_indices(nodes: list[ast.AST]) -> list[ast.expr]:
    """What records are read by: the index of every subscript that is read (not written) and the first argument
    of every ``.get``."""
    found = []
    for node in nodes:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            found.append(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            found.extend(node.args[:1])
    return found


def _whole_names(nodes: list[ast.AST], skip: set[int]) -> list[ast.Constant]:
    """Every literal that is a whole-model record's name, but for a table's column written (``df["loss"] = …``)
    or renamed (``columns={"loss": …}``)."""
    for node in nodes:
        if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            skip.add(id(node.slice))
        if isinstance(node, ast.keyword) and node.arg == "columns":
            skip.update(id(n) for n in ast.walk(node.value))
    return [
        n
        for n in nodes
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in WHOLE and id(n) not in skip
    ]


def hand_read_records(nodes: list[ast.AST], whole: bool, skip: set[int]) -> list[tuple[int, str]]:
    """(line, text) of every record read or named by hand: a whole-model name spelled (with ``whole``), an Add &
    Norm block's name as what something is read by, any block's name joined into a key with ``+``, a record's key
    read by subscript."""
    found = [(n.lineno, repr(n.value)) for n in _whole_names(nodes, set(skip))] if whole else []
    joined = [s for n in nodes if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) for s in (n.left, n.right)]
    for node in _read_indices(nodes):
        if isinstance(node, ast.Constant) and node.value in NORM_NAMES:
            found.append((node.lineno, f"block {node.value!r}"))
        elif _is_record_key(node):
            found.append((node.lineno, f"[{ast.unparse(node)}]: read it through keys.Records"))
    found += [
        (n.lineno, f"block {n.value!r} joined")
        for n in joined
        if isinstance(n, ast.Constant) and n.value in BLOCK_NAMES
    ]
    return found


def hand_built_keys(root: Path) -> list[str]:
    """``path:line: text`` of every key assembled or spelled outside the key module, and every record read by hand."""
    found = []
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root)
            if rel == KEY_MODULE:
                continue
            nodes = list(ast.walk(ast.parse(path.read_text())))  # walked once: the checks below read the same nodes
            docs, inside = _docstrings(nodes), set()
            found += [f"{rel}:{line}: {text}" for line, text in hand_read_records(nodes, top in WHOLE_SCANNED, docs)]
            for node in nodes:
                if isinstance(node, ast.JoinedStr):
                    text = _shape(node)
                    inside.update(id(v) for v in node.values)
                    if any(p.search(text) for p in ASSEMBLED):
                        found.append(f"{rel}:{node.lineno}: f{text!r}")
            said = docs | inside
            for node in nodes:
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in said
                    and LITERAL.fullmatch(node.value)
                ):
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_spells_a_key_by_hand():
    assert hand_built_keys(ROOT) == []


@pytest.mark.parametrize(
    "line",
    [
        'w = arrays[f"' + "dec." + '{layer}.cross.weights"]\n',  # in two parts: this file plants keys, builds none
        'w = arrays[f"{L}.self.weights"]\n',
        'k = f"{ctx.L}.norm{n}"\n',
        'out = arrays[f"{k}.out"]\n',
        'x = arrays["dec.input"]\n',
        'ok = key.endswith(".norm3.out")\n',
        'loss = tr.arrays["loss"].mean()\n',
        'p = probs_of(arrays, "probs")\n',
        'ids = a.get("label_ids")\n',
        'out = {"src_ids": ids}\n',
        'n = rec["norm1"]\n',
        'n = rec.get("norm3")\n',
        'k = "cross" + suffix\n',
        'w = arrays[keys.dec(0, "self", "weights")]\n',
        "p = arrays[keys.PROBS]\n",
        "y = rec.get(keys.layer_output(1))\n",
    ],
)
def test_the_check_finds_a_key_planted_in_a_module(tmp_path, line):
    for top in SCANNED:
        (tmp_path / top).mkdir()
    (tmp_path / "model" / "planted.py").write_text('"""A docstring may say dec.1.cross.weights."""\n' + line)
    assert [f.split(":")[0] for f in hand_built_keys(tmp_path)] == ["model/planted.py"], hand_built_keys(tmp_path)


def test_the_check_leaves_other_dotted_names_alone(tmp_path):
    for top in SCANNED:
        (tmp_path / top).mkdir()
    (tmp_path / "model" / "ok.py").write_text(
        'pairs = [(f"{o}.norm1.norm", f"{h}.self_attn_layer_norm"), (f"{o}.ffn.W_1", f"{h}.fc1")]\n'
        'key = keys.dec(1, "cross", "weights")\n'
        'version = f"{major}.{minor}"\n'
        'df["loss"] = loss\n'
        'table = table.rename(columns={"loss": "loss, masked"})\n'
        'mask = heads[keys.dec(1, "cross")]\n'
        'titles = {"cross": "Cross-attention", "ffn": "The FFN"}\n'
        'title, width = TITLES["cross"], size["ffn"]\n'
        'w = arrays.cross_weights(1) if kind == "cross" else arrays.dec(0, "norm1", "out")\n'
        "arrays[keys.PROBS] = probs\n"
    )
    assert hand_built_keys(tmp_path) == []


def test_the_names_and_their_checks():
    assert keys.dec(1, "cross", "weights") == "dec.1.cross.weights"
    assert keys.enc(0, "self") == "enc.0.self"
    assert keys.dec(2) == "dec.2"
    assert keys.embedding("dec", "pe") == "dec.pe"
    assert keys.head("dec", 1, "cross", 2) == "dec.1.cross.2"
    assert keys.layer_output(3) == "dec.3.norm3.out"
    assert keys.parse("dec.1.cross.weights") == keys.Key("dec", 1, "cross", "weights")
    assert keys.parse("dec.pe") == keys.Key("dec", None, None, "pe")
    assert keys.parse("logits") == keys.Key(None, None, None, "logits")
    assert keys.parse("dec.1.cross") == keys.Key("dec", 1, "cross", None)
    assert keys.parse("enc.0") == keys.Key("enc", 0, None, None)
    assert keys.is_kv("dec.0.self.K", "self") and not keys.is_kv("dec.0.self.Q", "self")
    assert keys.is_kv("dec.0.cross.V", "cross") and not keys.is_kv("dec.0.cross.V", "self")
    for bad in (lambda: keys.dec(0, "crosss"), lambda: keys.enc(0, "cross"), lambda: keys.dec(0, "ffn", "Q")):
        with pytest.raises(KeyError):
            bad()
    with pytest.raises(KeyError):
        keys.head("dec", 0, "ffn", 1)


@pytest.mark.parametrize(
    "prefix,rec",
    [("norm4", {"out": 0}), ("self", {"weight": 0}), ("dec", {"embedding": 0}), ("dec.0", {"crosss.Q": 0})],
)
def test_records_made_under_a_misspelt_name_are_refused_where_they_are_made(prefix, rec):
    with pytest.raises(KeyError):
        keys.prefixed(prefix, rec)


def test_records_made_under_their_names_pass():
    assert keys.prefixed("dec.1", keys.prefixed("norm3", {"out": 1})) == {"dec.1.norm3.out": 1}
    assert keys.prefixed("enc", {"pe": 2}) == {"enc.pe": 2} and keys.prefixed("self", None) == {}


def test_a_trace_holds_exactly_the_names_the_module_gives(tiny_model, tiny_tokenizer, tmp_path):
    cfg = tiny_model.cfg
    tr = teacher_forced_trace(tiny_model, tiny_tokenizer, "the cat sat", "le chat")
    assert list(tr.arrays) == keys.trace_keys(cfg.n_encoder_layers, cfg.n_decoder_layers)
    tr.save_npz(tmp_path / "t.npz")
    with np.load(tmp_path / "t.npz") as z:
        extra = [keys.TOKENS_SRC, keys.TOKENS_DEC_INPUT, keys.TOKENS_LABEL, keys.CAUSAL]
        assert sorted(z.files) == sorted([*keys.trace_keys(cfg.n_encoder_layers, cfg.n_decoder_layers), *extra])


def test_records_read_a_trace_by_layer_block_and_quantity(tiny_model, tiny_tokenizer):
    tr = teacher_forced_trace(tiny_model, tiny_tokenizer, "the cat sat", "le chat")
    a, last = tr.arrays, tiny_model.cfg.n_decoder_layers - 1
    assert isinstance(a, Records)
    assert a.cross_weights(last) is a[keys.dec(last, "cross", "weights")]
    assert a.self_weights(0) is a.self_attn(0, "weights") is a.dec(0, "self", "weights")
    assert a.layer_output(last) is a.norm(last, 3, "out")
    assert a.ffn(0, "hidden").shape[-1] == tiny_model.cfg.d_ff
    assert a.enc_weights(0) is a.enc(0, "self", "weights")
    assert a.embedding("dec", "pe") is a["dec.pe"]
    assert a.probs is a["probs"] and a.loss is a["loss"] and a.logits is a["logits"] and a.memory is a["memory"]
    assert a.label_ids is a["label_ids"] and a.src_ids is a["src_ids"] and a.dec_input_ids is a["dec_input_ids"]
    with pytest.raises(KeyError):
        a.cross_weights(last + 1)
    back = pickle.loads(pickle.dumps(a))
    assert isinstance(back, Records) and list(back) == list(a)
    assert np.array_equal(back.cross_weights(0), a.cross_weights(0))


def _docs_table(title: str) -> list[str]:
    """The rows of the table under ``title`` in docs/cli.md, where the command line's key tables live."""
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text[text.index(title) :]
    section = section[: section.index("\n#", 1)]
    return [line for line in section.splitlines() if line.startswith("| `")]


def _expand(pattern: str) -> list[str]:
    """``dec.{l}.self.{Q,K,V}`` → dec.0.self.Q, …; ``dec.{l}.cross.*`` → every quantity of the block (layer 0)."""
    pattern = pattern.replace("{l}", "0")
    m = re.fullmatch(r"(.*)\.\{(.+)\}", pattern)
    if m:
        return [f"{m[1]}.{q}" for q in m[2].split(",")]
    if pattern.endswith(".*"):
        side, i, block = pattern[:-2].split(".")
        return [keys.layer(side, int(i), block, q) for q in keys.BLOCKS[side][block]]
    return [pattern]


def test_the_docs_list_every_trace_key_and_no_other():
    listed = []
    for row in _docs_table("## Trace keys"):
        first = row.split("|")[1]
        listed += [k for name in re.findall(r"`([^`]+)`", first) for k in _expand(name)]
    tokens = [keys.TOKENS_SRC, keys.TOKENS_DEC_INPUT, keys.TOKENS_LABEL, keys.CAUSAL]
    assert sorted(listed) == sorted([*keys.trace_keys(1, 1), *tokens])


@pytest.mark.parametrize("title", ["## Explain keys", "## Patching keys"])
def test_the_other_tables_name_trace_records_as_a_trace_does(title):
    """The explain and patching files carry some of a trace's records (tokens, ids, loss) under the trace's names."""
    traced = [*keys.trace_keys(1, 1), keys.TOKENS_SRC, keys.TOKENS_DEC_INPUT, keys.TOKENS_LABEL]
    listed = {k for row in _docs_table(title) for k in re.findall(r"`([^`]+)`", row.split("|")[1])}
    shared = listed & set(traced)
    assert {keys.TOKENS_SRC, keys.SRC_IDS} <= shared
    own = {k for k in listed - shared if k.startswith("tokens.") or k.endswith("_ids") and "." not in k}
    assert own <= {"tokens.src_b", "src_b_ids", "translation_ids", "out_ids"}, own
