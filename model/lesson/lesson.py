"""A published 3-dimensional masked self-attention example, recomputed and checked.

Every stage is recomputed in numpy from the example's inputs (T_input and the printed
weight matrices) and compared with the numbers the example prints, cell by cell, to
its printed precision. Stages that do not follow from the example's own
formulas get a plain-English note; the cause is diagnosed by testing alternative
computations numerically (transposed scores, truncation, missing PE, ...).

Tolerance of a cell: half a unit in the last printed decimal, plus a worst-case
bound on the error caused by the printed weights being rounded to 4 decimals
(propagated through every stage). T_input is taken as exact: the example's printed
T_input + PE equals T_input + printed PE exactly.

Positional encoding: the example's PE is PE[pos, j] = sin(pos / 10000^(j/d)) for even
j and cos(pos / 10000^(j/d)) for odd j, with the raw column index j in the
exponent. The paper uses 2*floor(j/2)/d, which would make column 1 cos(pos).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from model.core.jsonio import dumps

# ---------------------------------------------------------------------------
# The example's printed numbers (a blog post on the decoder's forward pass in training).
EXAMPLE_SOURCE = (
    "Vikas Srinivasa in “Transformer Decoder: Forward Pass Mechanism and Key Insights” (part 5 of his blog series "
    "on the Transformer)"
)

EXAMPLE_TOKENS = (
    "<start>",
    "Mon",
    "nom",
    "est",
    "Vikas.",
    "J'aime",
    "le",
    "cricket,",
    "la",
    "finance",
    "et",
    "l'IA",
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)

_T_INPUT = (
    (0.45, 0.67, -0.12),
    (0.80, 0.05, -0.25),
    (0.60, 0.90, 0.02),
    (0.85, 0.10, 0.95),
    (0.12, 0.22, 0.55),
    (-0.10, 0.03, -0.07),
    (0.40, 0.75, -0.20),
    (0.15, -0.01, 0.04),
    (-0.20, -0.10, 0.04),
    (0.30, 0.40, 0.08),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_PE = (
    (0.0000, 1.0000, 0.0000),
    (0.8415, 0.9989, 0.0022),
    (0.9093, 0.9957, 0.0043),
    (0.1411, 0.9903, 0.0065),
    (-0.7568, 0.9828, 0.0086),
    (-0.9589, 0.9732, 0.0108),
    (-0.2794, 0.9615, 0.0129),
    (0.6570, 0.9477, 0.0151),
    (0.9894, 0.9318, 0.0172),
    (0.4121, 0.9140, 0.0194),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_X = (
    (0.45, 1.67, -0.12),
    (1.6415, 1.0489, -0.2478),
    (1.5093, 1.8957, 0.0243),
    (0.9911, 1.0903, 0.9565),
    (-0.6368, 1.2028, 0.5586),
    (-1.0589, 1.0032, -0.0592),
    (0.1206, 1.7115, -0.1871),
    (0.8070, 0.9377, 0.0551),
    (0.7894, 0.8318, 0.0572),
    (0.7121, 1.3140, 0.0994),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_W_Q = ((0.3745, 0.9507, 0.7320), (0.5987, 0.1560, 0.1560), (0.0581, 0.8662, 0.6011))
_W_K = ((0.7081, 0.0206, 0.9699), (0.8324, 0.2123, 0.1818), (0.1834, 0.3042, 0.5248))
_W_V = ((0.4320, 0.2912, 0.6119), (0.1395, 0.2921, 0.3664), (0.4561, 0.7852, 0.1997))
_Q = (
    (1.1613, 0.5844, 0.5178),
    (1.2283, 1.5096, 1.2162),
    (1.7016, 1.7517, 1.4151),
    (1.0795, 1.9409, 1.4705),
    (0.5140, 0.0661, 0.0573),
    (0.2005, -0.9015, -0.6542),
    (1.0589, 0.2196, 0.2428),
    (0.8668, 0.9613, 0.7701),
    (0.7969, 0.9298, 0.7420),
    (1.0591, 0.9681, 0.7860),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_K = (
    (1.6868, 0.3274, 0.6771),
    (1.9900, 0.1811, 1.6528),
    (2.6512, 0.4410, 1.8213),
    (1.7848, 0.5429, 1.6615),
    (0.6528, 0.4122, -0.1058),
    (0.0745, 0.1732, -0.8757),
    (1.4758, 0.3090, 0.3300),
    (1.3621, 0.2325, 0.9821),
    (1.2619, 0.2103, 0.9469),
    (1.6163, 0.3239, 0.9818),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_V = (
    (0.3726, 0.5247, 0.8632),
    (0.7423, 0.5899, 1.3392),
    (0.9275, 1.0125, 1.6228),
    (1.0164, 1.3582, 1.1968),
    (0.1475, 0.6045, 0.1626),
    (-0.3444, -0.0618, -0.2922),
    (0.2055, 0.3882, 0.6635),
    (0.5045, 0.5522, 0.8483),
    (0.4831, 0.5178, 0.7992),
    (0.5362, 0.6693, 0.9369),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_INF = float("-inf")
# Partially printed 10x10 matrices: (printed rows, printed columns, values).
# The ellipses hide rows 4-9 and the middle columns; the last row/column is the 10th.
_SCORES = (
    (0, 1, 2, 9),
    (0, 1, 2, 9),
    ((1.44, 1.88, 2.47, 1.48), (1.95, 2.72, 3.54, 2.11), (2.54, 3.48, 4.53, 2.71), (1.52, 2.06, 2.69, 1.61)),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_MASK = (
    (0, 1, 2, 9),
    (0, 1, 2, 9),
    ((0, _INF, _INF, _INF), (0, 0, _INF, _INF), (0, 0, 0, _INF), (0, 0, 0, 0)),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_MASKED = (
    (0, 1, 2, 9),
    (0, 1, 2, 9),
    ((1.44, _INF, _INF, _INF), (1.88, 2.72, _INF, _INF), (2.47, 3.54, 4.53, _INF), (1.48, 2.11, 2.71, 1.61)),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_WEIGHTS = (
    (0, 1, 2, 9),
    (0, 1, 2, 3, 9),
    (
        (1.0, 0.0, 0.0, 0.0, 0.0),
        (0.3015, 0.6985, 0.0, 0.0, 0.0),
        (0.0845, 0.2471, 0.6684, 0.0, 0.0),
        (0.0796, 0.1497, 0.2727, 0.1631, 0.0905),
    ),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_OUTPUT = (
    (0.3726, 0.5247, 0.8632),
    (0.6308, 0.5702, 1.1957),
    (0.8348, 0.8669, 1.4885),
    (0.8701, 0.9780, 1.3929),
    (0.7138, 0.8626, 1.1544),
    (0.3403, 0.5605, 0.6270),
    (0.6688, 0.8064, 1.1348),
    (0.7030, 0.8258, 1.1677),
    (0.6746, 0.7918, 1.1219),
    (0.6909, 0.8052, 1.1497),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
_W_O = ((0.3745, 0.9507, 0.7320), (0.5987, 0.1560, 0.1560), (0.0581, 0.8662, 0.6011))
_PROJECTED = (
    (0.5038, 1.1838, 0.8735),
    (0.6471, 1.7244, 1.2695),
    (0.9181, 2.2183, 1.6411),
    (0.9922, 2.1863, 1.6267),
    (0.8508, 1.8131, 1.3510),
    (0.4994, 0.9540, 0.7134),
    (0.7992, 1.7446, 1.2975),
    (0.8255, 1.8087, 1.3454),
    (0.7918, 1.7366, 1.2917),
    (0.8076, 1.7783, 1.3224),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)
# Decimals the example prints for each matrix (mask: exact 0 / -inf).
_DECIMALS = (
    ("T_input", 2),
    ("PE", 4),
    ("X", 4),
    ("W_Q", 4),
    ("W_K", 4),
    ("W_V", 4),
    ("Q", 4),
    ("K", 4),
    ("V", 4),
    ("scores", 2),
    ("mask", 0),
    ("masked_scores", 2),
    ("weights", 4),
    ("output", 4),
    ("W_O", 4),
    ("projected", 4),
)  # fmt: skip (rows as the worked example prints them) (rows as the worked example prints them)

STAGE_KEYS = tuple(k for k, _ in _DECIMALS)
INPUT_KEYS = ("T_input", "W_Q", "W_K", "W_V", "W_O")  # given, not computed


def _partial(spec, shape=(10, 10)) -> np.ndarray:
    rows, cols, values = spec
    out = np.full(shape, np.nan)
    out[np.ix_(rows, cols)] = values
    return out


@dataclass(frozen=True, eq=False)
class PrintedExample:
    """What the example prints; NaN marks a cell hidden by an ellipsis, -inf is printed."""

    tokens: tuple[str, ...]
    d_model: int
    n_heads: int
    T_input: np.ndarray
    PE: np.ndarray
    X: np.ndarray
    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    scores: np.ndarray
    mask: np.ndarray
    masked_scores: np.ndarray
    weights: np.ndarray
    output: np.ndarray
    W_O: np.ndarray
    projected: np.ndarray
    decimals: Mapping[str, int] = field(default_factory=lambda: dict(_DECIMALS))

    def printed(self, key: str) -> np.ndarray:
        return np.asarray(getattr(self, key), dtype=float)


def printed_example() -> PrintedExample:
    """A fresh PrintedExample holding the example's printed numbers."""
    a = np.array
    return PrintedExample(
        tokens=EXAMPLE_TOKENS,
        d_model=3,
        n_heads=1,
        T_input=a(_T_INPUT),
        PE=a(_PE),
        X=a(_X),
        W_Q=a(_W_Q),
        W_K=a(_W_K),
        W_V=a(_W_V),
        Q=a(_Q),
        K=a(_K),
        V=a(_V),
        scores=_partial(_SCORES),
        mask=_partial(_MASK),
        masked_scores=_partial(_MASKED),
        weights=_partial(_WEIGHTS),
        output=a(_OUTPUT),
        W_O=a(_W_O),
        projected=a(_PROJECTED),
    )


# ---------------------------------------------------------------------------
# Maths.


def example_positional_encoding(n_positions: int, d_model: int) -> np.ndarray:
    """PE[pos, j] = sin(pos/10000^(j/d)) for even j, cos(pos/10000^(j/d)) for odd j."""
    pos = np.arange(n_positions, dtype=float)[:, None]
    j = np.arange(d_model)
    angle = pos / 10000.0 ** (j / d_model)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def paper_positional_encoding(n_positions: int, d_model: int) -> np.ndarray:
    """Vaswani et al.: exponent 2*floor(j/2)/d, sin for even j, cos for odd j."""
    pos = np.arange(n_positions, dtype=float)[:, None]
    j = np.arange(d_model)
    angle = pos / 10000.0 ** (2 * (j // 2) / d_model)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def causal_mask(n: int) -> np.ndarray:
    """0 where j <= i, -inf where j > i (future tokens)."""
    return np.triu(np.full((n, n), -np.inf), k=1)


def softmax_rows(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


# Values carried with a worst-case radius (error bound from rounded inputs).
def _mm(a, ra, b, rb):
    return a @ b, np.abs(a) @ rb + ra @ np.abs(b) + ra @ rb


def _softmax_bound(s, rs):
    """Row softmax and a rigorous bound on its change when each s moves by <= rs."""
    w = softmax_rows(s)
    rs = np.where(np.isfinite(s), rs, 0.0)
    m = s.max(axis=1, keepdims=True)
    e_lo, e_hi = np.exp(s - rs - m), np.exp(s + rs - m)
    lo = e_lo / (e_lo + e_hi.sum(axis=1, keepdims=True) - e_hi)
    hi = e_hi / (e_hi + e_lo.sum(axis=1, keepdims=True) - e_lo)
    return w, np.maximum(hi - w, w - lo)


def _half_unit(decimals: int) -> float:
    return 0.5 * 10.0**-decimals


# ---------------------------------------------------------------------------
# Comparison with the printed numbers.


@dataclass(frozen=True)
class _Cmp:
    ok: bool
    max_abs_diff: float | None
    worst: tuple[int, int] | None  # cell with the largest excess over tolerance
    tolerance: float | None


def _compare(ours, radius, printed, decimals, mode="round") -> _Cmp:
    """Compare printed cells (non-NaN) with ours; mode 'round' or 'trunc'."""
    shown = ~np.isnan(printed)
    if not shown.any():
        return _Cmp(True, None, None, None)
    inf_p, inf_o = np.isinf(printed) & shown, np.isinf(ours) & shown
    same_inf = (printed == ours) | ~(inf_p | inf_o)
    finite = shown & ~inf_p & ~inf_o
    diff = np.abs(np.where(finite, ours, 0.0) - np.where(finite, printed, 0.0))
    unit = 10.0**-decimals
    slack = np.where(finite, radius, 0.0) + 1e-9
    if mode == "round":
        excess = diff - (unit / 2 + slack)
    else:  # truncated toward zero: p <= ours < p + unit, or p - unit < ours <= p if negative
        shift = np.where(finite, ours, 0.0) - np.where(finite, printed, 0.0)
        excess = np.where(ours >= 0, np.maximum(-shift, shift - unit), np.maximum(shift, -shift - unit)) - slack
    excess = np.where(finite, excess, -np.inf)
    excess = np.where(same_inf, excess, np.inf)
    worst = np.unravel_index(int(np.argmax(excess)), excess.shape)
    ok = bool(excess.max() <= 0)
    max_diff = float(diff.max()) if finite.any() else 0.0
    tol = float(np.where(finite, unit / 2 + slack, 0).max()) if mode == "round" else None
    return _Cmp(ok, max_diff, (int(worst[0]), int(worst[1])), tol)


@dataclass(frozen=True)
class _Alt:
    """An alternative computation tested against a printed matrix."""

    text: str
    value: np.ndarray
    radius: np.ndarray
    mode: str = "round"


def _fmt(x: float, decimals: int = 4) -> str:
    return str(x) if math.isinf(x) else f"{x:.{decimals}f}"


def _mismatch_note(title, what, ours, printed, decimals, cmp, alts) -> str:
    r, c = cmp.worst
    p, o = printed[r, c], ours[r, c]
    where = f"row {r + 1}, column {c + 1}"
    head = (
        f"{title}: the printed values do not follow from {what}; at {where} the example prints "
        f"{_fmt(p, decimals)} where the formula gives {_fmt(o)}"
    )
    for alt in alts:
        if _compare(alt.value, alt.radius, printed, decimals, alt.mode).ok:
            return f"{head}, and every printed cell instead matches {alt.text}."
    if alts:
        tried = "; ".join(a.text for a in alts)
        return f"{head}, and none of the tested alternatives ({tried}) reproduces them."
    return head + "."


# ---------------------------------------------------------------------------
# The lesson.


@dataclass(frozen=True, eq=False)
class Stage:
    key: str
    title: str
    formula: str  # LaTeX
    ours: np.ndarray
    printed: np.ndarray | None  # NaN where the example does not print the cell
    matches: bool | None  # None for given inputs (nothing computed to check)
    max_abs_diff: float | None
    note: str = ""
    tolerance: float | None = None  # largest per-cell tolerance used


@dataclass(frozen=True, eq=False)
class Lesson:
    stages: list[Stage]
    findings: list[tuple[str, str]]  # (stage key, what does not follow from the formulas there), in stage order
    pe_formula: str

    @property
    def discrepancies(self) -> list[str]:
        return [text for _, text in self.findings]

    def stage(self, key: str) -> Stage:
        for s in self.stages:
            if s.key == key:
                return s
        raise KeyError(key)

    def to_dict(self) -> dict:
        return {
            "pe_formula": self.pe_formula,
            "stages": [
                {
                    "key": s.key,
                    "title": s.title,
                    "formula": s.formula,
                    "ours": _jsonable(s.ours),
                    "printed": None if s.printed is None else _jsonable(s.printed),
                    "matches": s.matches,
                    "max_abs_diff": s.max_abs_diff,
                    "tolerance": s.tolerance,
                    "note": s.note,
                }
                for s in self.stages
            ],
            "discrepancies": list(self.discrepancies),
        }


def _jsonable(a: np.ndarray) -> list:
    def cell(x: float):
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "-inf" if x < 0 else "inf"
        return float(x)

    return [[cell(float(x)) for x in row] for row in np.atleast_2d(a)]


_TITLES = {
    "T_input": "Embedded shifted target sequence T_input",
    "PE": "Positional encodings PE",
    "X": "Decoder input X = T_input + PE",
    "W_Q": "Query weight matrix W_Q",
    "W_K": "Key weight matrix W_K",
    "W_V": "Value weight matrix W_V",
    "Q": "Query matrix Q",
    "K": "Key matrix K",
    "V": "Value matrix V",
    "scores": "Alignment scores",
    "mask": "Mask matrix",
    "masked_scores": "Masked scores",
    "weights": "Attention weights",
    "output": "Masked attention output",
    "W_O": "Output projection matrix W_O",
    "projected": "Final projected output",
}
_FORMULAS = {
    "T_input": r"T_{\text{input}} \in \mathbb{R}^{M \times D}",
    "PE": r"PE_{(pos,j)} = \begin{cases} \sin\left(pos / 10000^{j/D}\right) & j \text{ even} \\"
    r" \cos\left(pos / 10000^{j/D}\right) & j \text{ odd} \end{cases}",
    "X": r"X = T_{\text{input}} + PE",
    "W_Q": r"W_Q",
    "W_K": r"W_K",
    "W_V": r"W_V",
    "Q": r"Q = X W_Q",
    "K": r"K = X W_K",
    "V": r"V = X W_V",
    "scores": r"\text{Score}(Q, K) = \frac{Q K^{T}}{\sqrt{D / \text{heads}}}",
    "mask": r"\text{Mask}_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}",
    "masked_scores": r"\text{Masked Score} = \text{Score}(Q, K) + \text{Mask}",
    "weights": r"\alpha = \text{softmax}(\text{Masked Score})",
    "output": r"\text{Output} = \alpha V",
    "W_O": r"W_O",
    "projected": r"\text{Final Output} = \text{Output} \, W_O",
}
PE_FORMULA = (
    "PE[pos, j] = sin(pos / 10000^(j/D)) for even j, cos(pos / 10000^(j/D)) for odd j "
    "(raw column index j in the exponent; the paper uses 2*floor(j/2))"
)


class _Check:
    """The printed example being checked: ``add`` puts each stage recomputed beside the printed numbers (with the
    alternatives that could explain a mismatch); ``extra`` holds further findings by stage."""

    def __init__(self, ex: PrintedExample):
        self.ex, self.dec, self.P = ex, dict(ex.decimals), ex.printed
        self.stages: list[Stage] = []
        self.extra: dict[str, list[str]] = {}
        # the printed weight matrices are rounded to their decimals: the radius of each entry
        self.w_rad = {k: np.full_like(self.P(k), _half_unit(self.dec[k])) for k in ("W_Q", "W_K", "W_V", "W_O")}

    def add(self, key, ours, radius, *, what="", alts: Sequence[_Alt] = (), mode="round"):
        printed = self.P(key)
        if key in INPUT_KEYS:
            self.stages.append(Stage(key, _TITLES[key], _FORMULAS[key], _frozen(ours), printed, None, None))
            return
        cmp = _compare(ours, radius, printed, self.dec[key], mode)
        note = ""
        if not cmp.ok:
            note = _mismatch_note(_TITLES[key], what, ours, printed, self.dec[key], cmp, alts)
        self.stages.append(
            Stage(
                key, _TITLES[key], _FORMULAS[key], _frozen(ours), printed, cmp.ok, cmp.max_abs_diff, note, cmp.tolerance
            )
        )


def build_lesson(example: PrintedExample | None = None) -> Lesson:
    """Recompute every stage from the example's inputs and check the printed numbers."""
    ck = _Check(printed_example() if example is None else example)
    T, X = _check_inputs(ck)
    (Q, rQ), (K, rK), (V, rV) = _check_qkv(ck, T, X)
    output_variants = _check_attention(ck, Q, rQ, K, rK, V, rV)
    _check_projection(ck, output_variants)
    findings = [(s.key, t) for s in ck.stages for t in ([s.note] if s.note else []) + ck.extra.get(s.key, [])]
    return Lesson(stages=ck.stages, findings=findings, pe_formula=PE_FORMULA)


def _check_inputs(ck: _Check) -> tuple[np.ndarray, np.ndarray]:
    """T_input, the positional encoding and X = T_input + PE; returns T_input and X."""
    n, d = ck.P("T_input").shape
    zero_nd = np.zeros((n, d))
    # T_input: the sequence the example claims to embed.
    T = ck.P("T_input")
    ck.add("T_input", T, zero_nd)
    if len(ck.ex.tokens) != n:
        ck.extra["T_input"] = [
            f"The shifted target sequence lists {len(ck.ex.tokens)} tokens "
            f"({ck.ex.tokens[0]} ... {ck.ex.tokens[-1]}) but T_input has {n} rows, so "
            f"{abs(len(ck.ex.tokens) - n)} of the tokens have no embedding in the example."
        ]

    # PE.
    pe = example_positional_encoding(n, d)
    pe_paper = paper_positional_encoding(n, d)
    pe_alts = [
        _Alt("the paper's sin/cos(pos / 10000^(2*floor(j/2)/D))", pe_paper, zero_nd),
        _Alt(
            "sin(pos / 10000^(j/D)) in every column",
            np.sin(np.arange(n)[:, None] / 10000.0 ** (np.arange(d) / d)),
            zero_nd,
        ),
    ]
    ck.add("PE", pe, zero_nd, what="the formula " + PE_FORMULA, alts=pe_alts)
    paper_cmp = _compare(pe_paper, zero_nd, ck.P("PE"), ck.dec["PE"])
    if not paper_cmp.ok and ck.stages[-1].matches and paper_cmp.worst is not None:
        r, c = paper_cmp.worst
        ck.extra["PE"] = [
            "The printed PE is not the paper's sinusoidal encoding: it uses pos/10000^(j/D) "
            "with the raw column index j, whereas Vaswani et al. use pos/10000^(2*floor(j/2)/D), "
            f"which would give {pe_paper[r, c]:.4f} instead of {ck.P('PE')[r, c]:.4f} at row "
            f"{r + 1}, column {c + 1}."
        ]

    # X = T_input + PE (ours from the formula PE; also check against the printed PE).
    X = T + pe
    x_printed_pe = T + ck.P("PE")
    ck.add(
        "X",
        X,
        zero_nd,
        what="T_input + PE (formula)",
        alts=[
            _Alt("T_input + PE with the printed (4-decimal) PE", x_printed_pe, zero_nd),
            _Alt("T_input alone (no positional encoding)", T, zero_nd),
            _Alt("T_input + PE with the paper's PE", T + pe_paper, zero_nd),
        ],
    )
    x_cmp = _compare(x_printed_pe, zero_nd, ck.P("X"), ck.dec["X"])
    if not x_cmp.ok and x_cmp.worst is not None:
        r, c = x_cmp.worst
        ck.extra["X"] = [
            f"The printed T_input + PE is not the sum of the printed T_input and PE: at row "
            f"{r + 1}, column {c + 1} it shows {ck.P('X')[r, c]:.4f}, but "
            f"{T[r, c]:.2f} + {ck.P('PE')[r, c]:.4f} = {x_printed_pe[r, c]:.4f}."
        ]
    return T, X


def _check_qkv(ck: _Check, T: np.ndarray, X: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The weight matrices W_Q, W_K, W_V (given) and Q, K, V; returns each of Q, K, V with its radius."""
    zero_nd = np.zeros(X.shape)
    for key in ("W_Q", "W_K", "W_V"):
        ck.add(key, ck.P(key), ck.w_rad[key])

    # Q, K, V.
    x_rad_printed = np.full_like(X, _half_unit(ck.dec["X"]))
    qkv: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for out, wk in (("Q", "W_Q"), ("K", "W_K"), ("V", "W_V")):
        W, rW = ck.P(wk), ck.w_rad[wk]
        qkv[out] = _mm(X, zero_nd, W, rW)
        alts = [
            _Alt(f"printed (T_input + PE) · {wk}", *_mm(ck.P("X"), x_rad_printed, W, rW)),
            _Alt(f"T_input · {wk}, i.e. without positional encoding", *_mm(T, zero_nd, W, rW)),
            _Alt(f"X · {wk}ᵀ (transposed weights)", *_mm(X, zero_nd, W.T, rW.T)),
        ]
        alts += [
            _Alt(f"X · {other} (the wrong weight matrix)", *_mm(X, zero_nd, ck.P(other), ck.w_rad[other]))
            for other in ("W_Q", "W_K", "W_V")
            if other != wk
        ]
        ck.add(out, *qkv[out], what=f"X · {wk}", alts=alts)
    return [qkv["Q"], qkv["K"], qkv["V"]]


def _check_attention(ck: _Check, Q, rQ, K, rK, V, rV) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The scores, the mask, the masked scores, the weights and α·V; returns α·V with its radius, first ours and
    then each alternative that could have been printed, with what it is."""
    n = Q.shape[0]
    d_k = ck.ex.d_model / ck.ex.n_heads
    scale = math.sqrt(d_k)
    # Scores.
    raw, r_raw = _mm(Q, rQ, K.T, rK.T)
    S, rS = raw / scale, r_raw / scale
    mask = causal_mask(n)
    score_variants = [
        (f"Q·Kᵀ/√{d_k:g}", S, rS),
        (f"the transposed scores (K·Qᵀ/√{d_k:g})", S.T, rS.T),
        ("Q·Kᵀ without the 1/√(D/heads) scaling", raw, r_raw),
        (f"Q·Kᵀ/{d_k:g} (divided by D/heads instead of its root)", raw / d_k, r_raw / d_k),
    ]
    score_alts = [
        _Alt(f"{text}{suffix}", v, r, mode)
        for text, v, r in score_variants
        for mode, suffix in (
            ("round", ""),
            ("trunc", f" truncated (not rounded) to {ck.dec['scores']} decimals"),
        )
    ][1:]  # the first is ours
    pq, pk = ck.P("Q"), ck.P("K")
    rq_p, rk_p = np.full_like(pq, _half_unit(ck.dec["Q"])), np.full_like(pk, _half_unit(ck.dec["K"]))
    sp, rsp = _mm(pq, rq_p, pk.T, rk_p.T)
    score_alts.append(_Alt("the product of the printed Q and K", sp / scale, rsp / scale))
    ck.add("scores", S, rS, what=f"Q·Kᵀ/√{d_k:g} rounded to {ck.dec['scores']} decimals", alts=score_alts)

    # Mask.
    ck.add(
        "mask",
        mask,
        np.zeros_like(mask),
        what="0 on and below the diagonal, -inf above",
        alts=[
            _Alt("the transposed mask (-inf below the diagonal)", mask.T, np.zeros_like(mask)),
            _Alt("a mask that also hides the diagonal", np.triu(np.full((n, n), -np.inf)), np.zeros_like(mask)),
        ],
    )

    # Masked scores.
    masked_alts = [
        _Alt(f"{text} + Mask{suffix}", v + mask, r, mode)
        for text, v, r in score_variants
        for mode, suffix in (
            ("round", ""),
            ("trunc", f", truncated (not rounded) to {ck.dec['masked_scores']} decimals"),
        )
    ][1:]
    ck.add("masked_scores", S + mask, rS, what="Score + Mask", alts=masked_alts)

    # Attention weights.
    weight_variants = [(f"softmax({text} + Mask)", *_softmax_bound(v + mask, r)) for text, v, r in score_variants]
    weight_variants.append(("softmax(Q·Kᵀ/√(D/heads)) without the mask", *_softmax_bound(S, rS)))
    A, rA = weight_variants[0][1], weight_variants[0][2]
    ck.add("weights", A, rA, what="softmax(Score + Mask)", alts=[_Alt(t, v, r) for t, v, r in weight_variants[1:]])

    # Output = alpha V.
    output_variants = [(f"{t} · V", *_mm(a, ra, V, rV)) for t, a, ra in weight_variants]
    O, rO = output_variants[0][1], output_variants[0][2]
    ck.add("output", O, rO, what="α·V", alts=[_Alt(t, v, r) for t, v, r in output_variants[1:]])
    return output_variants


def _check_projection(ck: _Check, output_variants: list[tuple[str, np.ndarray, np.ndarray]]) -> None:
    """W_O (given, and flagged when it copies another weight matrix) and the output projected by it."""
    O, rO = output_variants[0][1], output_variants[0][2]
    # W_O: given; flag it if it is a copy of another printed weight matrix.
    ck.add("W_O", ck.P("W_O"), ck.w_rad["W_O"])
    for other in ("W_Q", "W_K", "W_V"):
        if np.array_equal(ck.P("W_O"), ck.P(other)):
            ck.extra["W_O"] = [
                f"The printed W_O is identical, entry for entry, to the printed {other}, so "
                f"the example reuses {other} as the output projection instead of a separate "
                "learned matrix."
            ]
            break

    # Final projection.
    WO, rWO = ck.P("W_O"), ck.w_rad["W_O"]
    po = ck.P("output")
    proj_alts = [
        _Alt(
            "the printed Output · W_O (so the difference is inherited from the Output stage)",
            *_mm(po, np.full_like(po, _half_unit(ck.dec["output"])), WO, rWO),
        ),
    ]
    proj_alts += [_Alt(f"({t}) · W_O", *_mm(o, ro, WO, rWO)) for t, o, ro in output_variants[1:]]
    ck.add("projected", *_mm(O, rO, WO, rWO), what="Output · W_O", alts=proj_alts)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


# ---------------------------------------------------------------------------
# Text report.


def _matrix_text(a: np.ndarray, decimals: int, hidden: str = "·") -> str:
    cells = [
        [hidden if math.isnan(x) else ("-inf" if x == -np.inf else f"{x:.{decimals}f}") for x in row]
        for row in np.atleast_2d(a)
    ]
    width = max(len(c) for row in cells for c in row)
    return "\n".join("  [" + " ".join(c.rjust(width) for c in row) + "]" for row in cells)


def format_lesson(lesson: Lesson) -> str:
    """A readable report: each stage's formula, our matrix, the printed one, and the verdict."""
    out = ["Decoder Lens: a published 3-d masked self-attention example, recomputed"]
    out += [f"Published by {EXAMPLE_SOURCE}.", ""]
    out.append(f"Positional encoding found: {lesson.pe_formula}")
    out.append(
        "A cell matches when |ours - printed| <= half a unit of the last printed decimal "
        "plus the worst-case effect of the printed weights being rounded to 4 decimals."
    )
    dec = dict(_DECIMALS)
    for i, s in enumerate(lesson.stages, 1):
        out += ["", f"[{i}] {s.title}  ({s.key})", f"formula: {s.formula}", "ours:"]
        out.append(_matrix_text(s.ours, 4))
        if s.printed is not None and s.matches is not None:
            out.append("printed (· = not printed):")
            out.append(_matrix_text(s.printed, dec.get(s.key, 4)))
        if s.matches is None:
            out.append("status: given by the example")
        elif s.matches:
            out.append(f"status: MATCHES (max |diff| {s.max_abs_diff:.2g}, tolerance {s.tolerance:.2g})")
        else:
            out.append(f"status: DIFFERS (max |diff| {s.max_abs_diff:.4g})")
        if s.note:
            out.append(f"note: {s.note}")
    out += ["", f"Discrepancies ({len(lesson.discrepancies)}):"]
    out += [f"  {i}. {t}" for i, t in enumerate(lesson.discrepancies, 1)]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None, echo: Callable[[str], object] = print) -> int:
    parser = argparse.ArgumentParser(prog="lesson", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the lesson as JSON")
    args = parser.parse_args(argv)
    lesson = build_lesson()
    echo(dumps(lesson.to_dict()) if args.json else format_lesson(lesson))
    return 0


__all__ = [
    "INPUT_KEYS",
    "Lesson",
    "PE_FORMULA",
    "STAGE_KEYS",
    "PrintedExample",
    "Stage",
    "build_lesson",
    "causal_mask",
    "format_lesson",
    "main",
    "paper_positional_encoding",
    "printed_example",
    "example_positional_encoding",
    "softmax_rows",
]

if __name__ == "__main__":
    raise SystemExit(main())
