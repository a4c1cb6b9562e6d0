"""The Corpus page: a whole set translated and analysed (one row per sentence, flags, summary plots, what each head
does over the set), each sentence a link to Explore (two to Compare) with the same settings.

The set is an uploaded or pasted file (plain lines, TSV ``english<TAB>french``, CSV with those columns) or a sample
of a bundled test set, read from the data directory (``model.train.data.default_data_dir()``). The analysis is
``model.interpret.corpus.analyse``, the same function as ``python -m model corpus``, run on a server thread of its own
(the page shows its progress and stays usable); a set analysed before (same model, decoding, file digest and head
table size) comes from the process's cache.
"""

from __future__ import annotations

import hashlib
import io
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Container
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st

from model.core import keys
from model.core.constants import MAX_BEAM
from model.core.jsonio import dumps
from model.decode.decoding import DecodeOptions
from model.interpret.corpus import (
    ATTRIBUTION,
    BOOTSTRAP,
    COLUMN_HELP,
    FAST_ABOVE,
    FLAG_WORDS_HELP,
    FLAGS,
    HEAD_SENTENCES,
    KINDS,
    MAX_BYTES,
    MEASURED,
    MEASURED_ON,
    ROLE_TEXT,
    SIGNALS,
    STATS,
    Analysis,
    Corpus,
    CorpusError,
    analyse,
    corpus_scores,
    correlations,
    flag_counts,
    flags_text,
    head_rows,
    lexicon_note,
    measured,
    precision_note,
    precision_of,
    read_corpus,
    report,
    sentences,
    slices,
    table_dtype,
    write_csv,
)
from model.interpret.lexicon import Lexicon, of_model
from model.interpret.runs import beam_of, changed_rows, decoding, run_names, second_run
from model.io.checkpoint import LoadedModel, ModelDirError, default_model_dir
from model.train import data
from views.plot import builders as viz
from viz.corpus import difference_histogram, sentence_scatter

from .common import dir_stamp, load_model, md, show
from .state import offered_model_dirs

SETS = {
    "multi30k": "Multi30k test 2016 (sample)",
    "tatoeba": "Tatoeba test split (sample)",
    "upload": "Upload a file",
    "paste": "Paste sentences",
}
SIZES = (50, 100, 200, 500, 1000)
DEFAULT_SIZE = 100
PROGRESS_S = 0.5  # the progress bar of a running analysis is read again this often
SAMPLE_SEED = 0  # the bundled samples: the same sentences for everyone
CACHE_ENTRIES = 8  # analysed sets kept by the server (each a few MB), and uploaded or pasted sets by digest
KEPT = "kept_"  # prefix of the session keys that keep a widget's value across pages
DIGEST_CHARS = 16  # of a set's SHA-256, in the page's link
CREDITS = (
    "Bundled sets: Multi30k (Elliott et al., 2016; Flickr30k captions, research use) and the Tatoeba Project "
    "(CC-BY 2.0 (France); www.manythings.org/anki and tatoeba.org)."
)
VERSUS = {"": "None", "beam": "Another beam width", "model": "Another model"}  # the second run, by the link's vs
VERSUS_BEAM = 5  # the second run's beam width when the link names none
RUN = "run"  # the link's parameter saying the analysis was asked for ("1")
HEAD_STAGE = {"self": "self", "cross": "cross"}  # Explore's stage that draws a decoder head's weights
HEAD_CHOICES = (50, 100, HEAD_SENTENCES, 500, 1000)  # the head table's sizes offered below the whole set


@st.cache_resource(show_spinner=False)
def analysed_sets() -> OrderedDict:
    """The server's analysed sets, by (model, decoding, digest), most recent last (bounded by CACHE_ENTRIES)."""
    return OrderedDict()


@st.cache_data(show_spinner="Reading the bundled set…", max_entries=4)
def bundled(name: str, size: int, data_dir: str) -> tuple[bytes, str]:
    """A seeded sample of ``size`` pairs of a bundled test set as TSV bytes (the file the analysis reads), in the
    set's order."""
    root = Path(data_dir)
    if name == "multi30k":
        pairs = data.load_multi30k_test(root, data.MULTI30K_TESTS[0])
    else:
        groups = data.group_by_source(data.split_tatoeba(data.read_tatoeba(root / data.TATOEBA_FILE))["test"])
        pairs = [(en, refs[0]) for en, refs in groups]
    keep = sorted(random.Random(SAMPLE_SEED).sample(range(len(pairs)), min(size, len(pairs))))
    text = "\n".join(f"{pairs[i][0]}\t{pairs[i][1]}" for i in keep)
    return text.encode(), f"{name}.tsv"


def from_url(key: str, param: str, options: Container[object], default: object, parse: Callable = str) -> None:
    """The widget ``key`` starts at the value kept from this session's last visit to the page (``keep``), else at
    the link's ``param`` (``default`` when it is not one of ``options``), and keeps the user's choice after: given
    by its key, not by an index or value that a link's changing parameter would make a new widget of (which
    swallowed the first click after each change)."""
    if key in st.session_state:
        return
    kept = st.session_state.get(KEPT + key)
    try:
        value = kept if kept is not None else parse(st.query_params.get(param, default))
    except ValueError:
        value = default
    st.session_state[key] = value if value in options else default


def keep(key: str) -> None:
    """Copy a widget's value where it outlives the page: Streamlit forgets a widget's state when a run does not draw
    it (another page was open), and a pasted set would be lost."""
    st.session_state[KEPT + key] = st.session_state.get(key)


@st.cache_resource(show_spinner=False)
def kept_sets() -> OrderedDict:
    """Uploaded and pasted sets by digest (the link's ``digest``), so that the page's link reopens the same set on
    this server, most recent last (bounded by CACHE_ENTRIES)."""
    return OrderedDict()


def remember(raw: bytes, name: str) -> None:
    digest = hashlib.sha256(raw).hexdigest()[:DIGEST_CHARS]
    store = kept_sets()
    store[digest] = (raw, name)
    store.move_to_end(digest)
    while len(store) > CACHE_ENTRIES:
        store.popitem(last=False)
    st.query_params["digest"] = digest


def choose_input() -> tuple[bytes | None, str, str]:
    """The set's bytes and name, or None and a sentence saying why there is none ("" when the user has yet to
    give one). An uploaded or pasted set stays: in the session (across pages) and on the server by its digest (the
    link's ``digest``)."""
    from_url("corpus_set", "set", SETS, "multi30k")
    kind = st.radio("Set", list(SETS), format_func=SETS.get, horizontal=True, key="corpus_set")
    keep("corpus_set")
    st.query_params["set"] = kind
    if kind in ("multi30k", "tatoeba"):
        st.query_params.pop("digest", None)
        from_url("corpus_n", "n", SIZES, DEFAULT_SIZE, int)
        size = st.select_slider("Sentences in the sample", options=list(SIZES), key="corpus_n")
        keep("corpus_n")
        st.query_params["n"] = str(size)
        root = data.default_data_dir()
        if not root.is_dir():
            return None, "", "The data directory with the bundled sets is not on this server: upload or paste a set."
        try:
            raw, name = bundled(kind, size, str(root))
        except OSError:
            return None, "", f"The bundled set {SETS[kind]} cannot be read on this server: upload or paste a set."
        return raw, name, ""
    linked = kept_sets().get(st.query_params.get("digest", ""))
    if kind == "upload":
        up = st.file_uploader(
            "A file: one English sentence a line, TSV english⇥french (or english ||| french), or CSV with the columns "
            "english and french",
            help=f"Files up to {MAX_BYTES // 2**20} MB.",
        )
        st.caption(f"Files up to {MAX_BYTES // 2**20} MB are read.")
        if up is not None:
            st.session_state[KEPT + "upload"] = (up.getvalue(), up.name)
        got = st.session_state.get(KEPT + "upload") or linked
        if got is None:
            return None, "", ""
        if up is None:
            st.caption(md(f"The set kept from before: {got[1]} ({len(got[0]):,} bytes). Upload another to replace it."))
            if st.button("Forget this set", key="corpus_forget"):  # the uploader's ✕ empties only the uploader
                st.session_state.pop(KEPT + "upload", None)
                st.query_params.pop("digest", None)
                st.rerun()
        remember(*got)
        return got[0], got[1], ""
    if "corpus_paste" not in st.session_state:
        st.session_state["corpus_paste"] = st.session_state.get(KEPT + "corpus_paste") or (
            linked[0].decode("utf-8", errors="replace") if linked else ""
        )
    text = st.text_area(
        "Sentences: one a line; english⇥french (a tab) or english ||| french adds a reference",
        height=150,
        key="corpus_paste",
    )
    keep("corpus_paste")
    if not text.strip():
        st.query_params.pop("digest", None)
        return None, "", ""
    remember(text.encode(), "pasted.txt")
    return text.encode(), "pasted.txt", ""


def decoding_choice() -> DecodeOptions:
    beams = range(1, MAX_BEAM + 1)
    from_url("corpus_beam", "beam", beams, 1, int)
    beam = st.select_slider("Beam width (1 = greedy)", options=list(beams), key="corpus_beam")
    keep("corpus_beam")
    if beam == 1:
        st.query_params.pop("beam", None)
    else:
        st.query_params["beam"] = str(beam)
    return decoding(beam)


@dataclass
class Progress:
    """Where a running job is, written by it as it goes and read by its page's progress bar."""

    parts: dict[str, float]  # each part's time per sentence of the set, relative (part_costs), in the job's order
    started: float = field(default_factory=time.perf_counter)
    state: tuple[int, int, str] = (0, 0, "waiting")  # (done, total, what is being done)
    at: float = 0.0  # when ``state`` was reported (perf_counter)


@dataclass(frozen=True)
class Job:
    """One analysis (or second run) running on the server, apart from any page run."""

    future: Future
    progress: Progress


@st.cache_resource(show_spinner=False)
def analysis_jobs() -> dict[tuple, Job]:
    """The jobs under way on this server, by the same key as ``analysed_sets`` (two sessions asking for one result
    share its job)."""
    return {}


@st.cache_resource(show_spinner=False)
def _worker() -> ThreadPoolExecutor:
    # one job at a time: each uses every core torch is given; a second waits its turn
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="corpus-analysis")


Work = Callable[[Callable[[int, int, str], None]], object]  # a job: given its progress report, returns its result
R = TypeVar("R")  # a job's result


def background(key: tuple, parts: dict[str, float], work: Callable[[Callable[[int, int, str], None]], R]) -> R | None:
    """A job's result from the server's cache; or, while it runs on the server (started here when it is new), None
    and its progress bar, updated without blocking the page: the reader may change the settings or open another page
    meanwhile, and the job goes on (the page opened again shows it, or its result)."""
    store, jobs = analysed_sets(), analysis_jobs()
    if key in store:
        store.move_to_end(key)
        return store[key]
    job = jobs.get(key)
    if job is None:
        progress = Progress(parts)
        job = jobs[key] = Job(_worker().submit(_run, work, key, progress), progress)
    if job.future.done():
        error = job.future.exception()
        if error is not None:  # kept: the set's page says so, rather than running it again on every click
            st.error(md(f"The analysis stopped: {str(error).splitlines()[0] if str(error) else type(error).__name__}."))
            return None
        jobs.pop(key, None)
        return job.future.result()
    watch(key)
    return None


@st.cache_resource(show_spinner=False, max_entries=2)
def model_lexicon(path: str, stamp: tuple) -> Lexicon | None:
    """The model directory's word translation table (0.3 s and about 90 MB to read): read once per model and table,
    by the analyses' threads; a damaged one is not kept, so each analysis says so."""
    return of_model(path)


def run_analysis(lm: LoadedModel, corpus: Corpus, opts: DecodeOptions, digest: str, heads: int) -> Analysis | None:
    """The set's analysis (``background``) with its head table over the first ``heads`` sentences, keyed by model,
    decoding, the set's digest and ``heads``."""
    key = (lm.path.name, dir_stamp(str(lm.path)), opts, digest, heads)

    def work(report: Callable[[int, int, str], None]) -> Analysis:
        lexicon = model_lexicon(str(lm.path), dir_stamp(str(lm.path)))
        return analyse(lm.model, lm.tokenizer, corpus, opts, heads, progress=report, lexicon=lexicon)

    return background(key, analysis_costs(lm, len(corpus.sources), heads), work)


def _run(work: Work, key: tuple, progress: Progress):
    def report(done: int, total: int, what: str) -> None:
        progress.state, progress.at = (done, total, what), time.perf_counter()

    progress.started = time.perf_counter()
    result = work(report)
    store = analysed_sets()
    store[key] = result
    while len(store) > CACHE_ENTRIES:
        store.popitem(last=False)
    return result


# Each part's time per sentence it reads, relative, so that the bar and its time left follow the clock: the head
# table reads fewer sentences than the set, but each costs most. Measured as the app runs it, on one torch thread
# (set_threads' default): the bundled model, greedy, Multi30k test 2016: 4.5, 6.5, 37 and 125 ms, the head table's
# 85 ms where its removals run in bfloat16
HEAD_PART = "measuring the heads"  # the head table's part, as analyse reports it
PART_COST = {"translating": 4.5, "scoring": 6.5, "erasing source words": 37.0, HEAD_PART: 125.0}
HEAD_COST = {"float32": PART_COST[HEAD_PART], "bfloat16": 85.0}  # a head sentence's, by its removals' precision


def part_costs(sentences: int, heads: int, precision: str = "float32") -> dict[str, float]:
    """Each part's time per sentence of the set, relative: the head table's (its removals in ``precision``) spread
    over the set (it reads the first ``heads``)."""
    return {**PART_COST, HEAD_PART: HEAD_COST.get(precision, PART_COST[HEAD_PART]) * heads / max(sentences, 1)}


def analysis_costs(lm: LoadedModel, sentences: int, heads: int) -> dict[str, float]:
    """``part_costs`` of an analysis of ``sentences`` with its head table over ``heads``, in the precision that table
    runs its removals in on ``lm``'s device."""
    return part_costs(sentences, heads, precision_of(table_dtype(lm.model.device, heads)))


def done_share(done: int, total: int, what: str, costs: dict[str, float]) -> float:
    """The share of a job's time behind it when its part ``what`` has ``done`` of ``total`` sentences done (``costs``:
    each part's time per sentence of the set, in the job's order)."""
    parts = list(costs)
    before = sum(costs[k] for k in parts[: parts.index(what)]) if what in costs else 0.0
    return (before + costs.get(what, 0.0) * done / max(total, 1)) / sum(costs.values())


def time_left(progress: Progress, frac: float, now: float) -> float | None:
    """The seconds a job has left at ``now``, its share ``frac`` done as of its last report: the whole job's time read
    at that report, not now, so that between two reports the time left counts down (None before a share worth
    reading)."""
    if frac <= 0.02:
        return None
    return max((progress.at - progress.started) / frac - (now - progress.started), 0.0)


@st.fragment(run_every=PROGRESS_S)
def watch(key: tuple) -> None:
    """The running analysis's progress bar, read again every ``PROGRESS_S``; the whole page once it is done."""
    job = analysis_jobs().get(key)
    if job is None or job.future.done():
        st.rerun()
    done, total, what = job.progress.state
    if what == "waiting":
        busy = any(
            j is not job and j.progress.state[2] != "waiting" and not j.future.done() for j in analysis_jobs().values()
        )
        st.progress(0.0, text="Waiting for another analysis to finish…" if busy else "Starting…")
        return
    frac = done_share(done, total, what, job.progress.parts)
    left = time_left(job.progress, frac, time.perf_counter())
    eta = "" if left is None else f", about {left:.0f} s left"
    st.progress(min(frac, 1.0), text=f"{what.capitalize()}: {done:,} of {total:,} sentences{eta}")
    st.caption("The analysis runs on the server: change the settings or open another page meanwhile.")


def explore_link(row: dict, opts: DecodeOptions, model: str, **extra: str) -> str:
    """Explore on this sentence with the page's decoding (and its reference)."""
    q = {"src": row["source"]}
    if row.get("reference"):
        q["ref"] = row["reference"]
    if opts.strategy == "beam":
        q.update(strategy="beam", beam=str(opts.beam))
    q.update(model=model, **extra)
    return "/explore?" + urlencode(q)


def compare_link(a: dict, b: dict, opts: DecodeOptions, model: str) -> str:
    q = {"src": a["source"], "srcb": b["source"], "model": model}
    if opts.strategy == "beam":
        q.update(strategy="beam", beam=str(opts.beam))
    return "/compare?" + urlencode(q)


def two_runs_link(row: dict, opts: DecodeOptions, opts_b: DecodeOptions, model: str) -> str:
    """Compare on one sentence decoded two ways: A with ``opts``, B with ``opts_b``'s beam width (the link's
    ``beamb``; 1: greedy)."""
    q = {"src": row["source"], "srcb": row["source"], "model": model}
    if opts.strategy == "beam":
        q.update(strategy="beam", beam=str(opts.beam))
    q["beamb"] = str(beam_of(opts_b))
    return "/compare?" + urlencode(q)


def table(rows: list[dict], opts: DecodeOptions, model: str, refs: bool) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df["flags"] = [flags_text(r) for r in rows]
    df["explore"] = [explore_link(r, opts, model) for r in rows]
    cols = ["index", "flags", "source", "translation", "reference", "chrf", "bleu", "mean_prob", "min_prob"]
    cols += ["min_prob_token", "min_support", "min_support_word", "min_word_prob", "min_word_prob_word"]
    cols += ["source_share", "length_ratio", "names_numbers", "names_numbers_copied", "cut_off", "explore"]
    if not refs:
        cols = [c for c in cols if c not in ("reference", "chrf", "bleu")]
    return df[cols]


def index_column() -> Any:  # Streamlit names its column type only in a private module
    """A table's sentence number: its line in the set."""
    return st.column_config.NumberColumn("#", help="the sentence's line in the set (from 0)", width="small")


def score_column(label: str, help: str | None = None) -> Any:
    """A corpus score's column (BLEU, chrF), with the one decimal the page prints scores with."""
    return st.column_config.NumberColumn(label, help=help, format="%.1f")


def column_config() -> dict:
    num = st.column_config.NumberColumn
    prob = lambda label, key: st.column_config.ProgressColumn(  # noqa: E731
        label, help=COLUMN_HELP[key], min_value=0.0, max_value=1.0, format="%.2f"
    )
    return {
        "index": index_column(),
        "flags": st.column_config.TextColumn(
            "flags", help=FLAG_WORDS_HELP + ". " + "; ".join(f"{k}: {v}" for k, v in FLAGS.items()), width="large"
        ),
        "source": st.column_config.TextColumn("source", width="medium"),
        "translation": st.column_config.TextColumn("translation", width="medium"),
        "reference": st.column_config.TextColumn("reference", width="medium"),
        "chrf": score_column("chrF", COLUMN_HELP["chrf"]),
        "bleu": score_column("BLEU", COLUMN_HELP["bleu"]),
        "mean_prob": prob("mean p", "mean_prob"),
        "min_prob": prob("lowest p", "min_prob"),
        "min_prob_token": st.column_config.TextColumn("lowest-p token"),
        "min_support": num("lowest support", help=COLUMN_HELP["min_support"], format="%.2f"),
        "min_support_word": st.column_config.TextColumn("least-supported word"),
        "min_word_prob": prob("lowest word p", "min_word_prob"),
        "min_word_prob_word": st.column_config.TextColumn("least likely word"),
        "source_share": prob("from source", "source_share"),
        "length_ratio": num("length ratio", help=COLUMN_HELP["length_ratio"], format="%.2f"),
        "names_numbers": num("names/numbers", help=COLUMN_HELP["names_numbers"]),
        "names_numbers_copied": num("copied verbatim", help=COLUMN_HELP["names_numbers_copied"]),
        "cut_off": st.column_config.CheckboxColumn("cut off", help=COLUMN_HELP["cut_off"]),
        "explore": st.column_config.LinkColumn("open", help="open this sentence in Explore", display_text="Explore"),
    }


def flags_list(bundled: bool, references: bool = False) -> str:
    """The flags' definitions, a line each, and for the bundled model how far each held on sentences labelled by
    reading, read as this set is: with the sets' references when it has them (its thresholds were chosen and
    measured there; another model's flags are not measured)."""
    lines = []
    for k, v in FLAGS.items():
        held = f" Measured: {measured(k, references)}." if bundled and k in MEASURED else ""
        lines.append(f"- *{k}*: {md(v)}.{held}")
    how = f" ({'with' if references else 'without'} their references, as this set is read)"
    head = f"**Flags**, each defined in one line{f' and measured on {MEASURED_ON}{how}' if bundled else ''}:"
    tail = "" if bundled else "\n\nTheir thresholds were chosen and measured on the bundled model, not on this one."
    return head + "\n" + "\n".join(lines) + tail


def render_rows(result: Analysis, corpus: Corpus, opts: DecodeOptions, model: str, bundled: bool = False) -> None:
    rows = result.rows
    refs = corpus.references is not None
    st.header("Sentences")
    st.markdown(flags_list(bundled, refs))
    st.caption(f"{md(lexicon_note(result.lexicon))} Share from the source: {md(ATTRIBUTION)}.")
    if "corpus_flags" not in st.session_state:  # the link's choice on the first run, the widget's after
        st.session_state["corpus_flags"] = [f for f in st.query_params.get_all("flag") if f in FLAGS]
    chosen = st.multiselect("Show only sentences flagged", list(FLAGS), key="corpus_flags")
    if chosen:
        st.query_params["flag"] = chosen
    else:
        st.query_params.pop("flag", None)
    shown = [r for r in rows if all(f in r["flags"] for f in chosen)]
    df = table(shown, opts, model, refs) if shown else None
    if df is None:
        st.info("No sentence raises every chosen flag.")
        return
    event = st.dataframe(
        df,
        column_config=column_config(),
        hide_index=True,
        on_select="rerun",
        selection_mode="multi-row",
        key="corpus_table",
        height=min(36 * len(df) + 40, 420),
    )
    picked = [shown[i] for i in event.selection.rows] if event and event.selection else []
    if len(picked) == 1:
        st.markdown(f"[Open sentence {picked[0]['index']} in Explore]({explore_link(picked[0], opts, model)})")
    elif len(picked) == 2:
        link = compare_link(picked[0], picked[1], opts, model)
        st.markdown(f"[Compare sentences {picked[0]['index']} and {picked[1]['index']}]({link})")
    else:
        st.caption("Select a row to open it in Explore, or two rows to compare them.")


def scatter_key(x_key: str, digest: str, opts: DecodeOptions) -> str:
    """A scatter's element key, one per set and decoding: the point picked in one set is not taken for a sentence of
    the next."""
    return f"corpus_scatter_{x_key}_{hashlib.sha256(repr((digest, opts)).encode()).hexdigest()[:12]}"


def render_summary(result: Analysis, corpus: Corpus, opts: DecodeOptions, model: str, digest: str) -> None:
    rows = result.rows
    refs = corpus.references is not None
    st.header("Over the set")
    render_scores(result)
    render_slices(result, corpus)
    counts = flag_counts(rows)
    show(
        viz.bar_figure(
            list(counts),
            list(counts.values()),
            title=f"Sentences per flag (of {sentences(len(rows))})",
            x_title="sentences",
            counts=True,
        ),
        "corpus_flag_counts",
    )
    col = lambda k: [r[k] if r[k] is not None else np.nan for r in rows]  # noqa: E731
    y_key, y_name = ("chrf", "sentence chrF") if refs else ("mean_prob", "mean probability")
    flagged = [bool(r["flags"]) for r in rows]
    src, out = [r["source"] for r in rows], [r["translation"] for r in rows]
    pairs = (
        [("mean_prob", "mean probability"), ("source_share", "share from the source")]
        if refs
        else [("source_share", "share from the source")]
    )
    st.caption("One point a sentence (flagged ones in orange); click a point to get its link.")
    # Drawn by the page's own figure element, which returns the point clicked: st.plotly_chart would load a second,
    # full Plotly bundle (1.1 s of the browser parsing it when the page opens) for these two figures alone.
    for x_key, x_name in pairs:
        fig = sentence_scatter(
            col(x_key),
            col(y_key),
            src,
            out,
            flagged,
            x_title=x_name,
            y_title=y_name,
            title=f"{y_name[0].upper() + y_name[1:]} against {x_name}",
        )
        picked = show(fig, scatter_key(x_key, digest, opts), pick=True)
        if isinstance(picked, int) and 0 <= picked < len(rows):
            i = picked
            st.markdown(
                f"Sentence {i}: {md(rows[i]['source'])} → {md(rows[i]['translation'])} · "
                f"[open it in Explore]({explore_link(rows[i], opts, model)})"
            )
    if refs:
        rho_of = correlations(rows)
        names = [SIGNALS[k] for k, v in rho_of.items() if np.isfinite(v)]
        rho = [v for v in rho_of.values() if np.isfinite(v)]
        undefined = [SIGNALS[k] for k, v in rho_of.items() if not np.isfinite(v)]
        st.caption(
            "Which signal to trust on this model: the closer ρ is to 1, the better it ranks the sentences as chrF does."
            + (
                f" No ρ for {', '.join(undefined)}: fewer than 3 sentences have a value, or they all have the same "
                "(or the same chrF), so there is nothing to rank."
                if undefined
                else ""
            )
        )
        if names:
            show(
                viz.bar_figure(
                    names,
                    rho,
                    title="Each signal's Spearman ρ with chrF",
                    x_title="Spearman ρ with chrF",
                    fmt=".2f",
                ),
                "corpus_correlations",
            )
    else:
        st.caption("Correlations with chrF need references.")


@st.cache_data(show_spinner="Bootstrapping the corpus scores…", max_entries=CACHE_ENTRIES)
def scores_of(pairs: tuple[tuple[str, str | None], ...]) -> dict | None:
    """``corpus_scores`` of (translation, reference) pairs, kept: 1,000 resamples take a second or two."""
    return corpus_scores([{"translation": t, "reference": r} for t, r in pairs])


def render_scores(result: Analysis) -> None:
    """Corpus BLEU and chrF as papers report them: the score, its bootstrap 95 % interval and sacrebleu's
    signature."""
    scores = scores_of(tuple((r["translation"], r["reference"]) for r in result.rows))
    if scores is None:
        st.caption("Corpus BLEU and chrF need references.")
        return
    cols = st.columns(2)
    for c, (name, label) in zip(cols, (("bleu", "BLEU"), ("chrf", "chrF"))):
        sc = scores[name]
        c.metric(f"Corpus {label}", f"{sc['score']:.2f}")
        c.caption(
            f"95 % bootstrap interval {sc['low']:.2f}–{sc['high']:.2f} (the 2.5th–97.5th percentiles of {BOOTSTRAP:,} "
            f"resamples of the sentences; sacrebleu reports their mean ± half that width, {sc['mean']:.2f} ± "
            f"{sc['ci']:.2f}). sacrebleu signature: `{sc['signature']}`"
        )


def render_slices(result: Analysis, corpus: Corpus) -> None:
    """The scores per slice: by source length, by flag, by the file's domain column. A slice without a sentence is
    named, not drawn as a row of blanks; without references there are no scores to show."""
    st.subheader("Slices")
    every = slices(result.rows, corpus.domains)
    refs = corpus.references is not None
    empty = [s["slice"] for s in every if not s["sentences"]]
    st.caption(
        "The set cut by the source's length in words, by flag, and by domain (a TSV's third column or a CSV's "
        "domain column, when the file gives one): "
        + ("corpus BLEU and chrF of each slice, and the share flagged." if refs else "each slice's share flagged.")
        + (f" No sentence in: {md(', '.join(empty))}." if empty else "")
    )
    df = pd.DataFrame([s for s in every if s["sentences"]])
    st.dataframe(
        df if refs else df.drop(columns=["bleu", "chrf"]),
        hide_index=True,
        key="corpus_slices",
        column_config={
            "bleu": score_column("BLEU"),
            "chrf": score_column("chrF"),
            "flagged": st.column_config.ProgressColumn("flagged", min_value=0.0, max_value=1.0, format="percent"),
        },
    )


DEFAULT_STAT = "loss_increase"  # the head statistic coloured when the link names none


def stat_name(key: str) -> str:
    """A head statistic as the page writes it: "loss_increase" -> "loss increase"."""
    return key.replace("_", " ")


def render_heads(result: Analysis, opts: DecodeOptions, model: str) -> None:
    heads = result.heads
    assert heads is not None  # the page's analysis measures them (run_analysis)
    st.header("What each head does over the set")
    n = heads["sentences"]
    st.caption(
        f"Over {'the one sentence' if n == 1 else f'the first {n:,} sentences'}, teacher-forced on {heads['target']}. "
        + " ".join(f"**{stat_name(k)}**: {md(v)}." for k, v in STATS.items())
        + f" {precision_note(heads['precision'])}".rstrip()
    )
    st.caption(
        "**Roles**, the first that holds: "
        + "; ".join(f"*{k}*: {md(v)}" for k, v in ROLE_TEXT.items())
        + ". The thresholds sit in the gaps between the bundled model's heads over 80 held-out sentences."
    )
    from_url("corpus_hstat", "hstat", STATS, DEFAULT_STAT)
    stat = st.selectbox("Statistic coloured", list(STATS), format_func=stat_name, key="corpus_hstat")
    st.query_params["hstat"] = stat
    tabs = st.tabs([KINDS[k].capitalize() for k in KINDS])
    by_kind: dict[str, list[dict]] = {}
    for r in head_rows(heads):
        by_kind.setdefault(r["kind"], []).append(r)
    sources = [r["source"] for r in result.rows]
    for tab, kind in zip(tabs, KINDS):
        with tab:
            t = heads[kind]
            layer_name = "encoder layer" if kind == "enc" else "decoder layer"
            drawn = stat if np.isfinite(np.asarray(t[stat], dtype=float)).any() else DEFAULT_STAT
            if drawn != stat:
                st.caption(
                    f"{stat_name(stat).capitalize()} is not measured for {KINDS[kind]}: coloured by {stat_name(drawn)}."
                )
            show(
                viz.head_grid(
                    t[drawn],
                    t["role"],
                    title=f"{KINDS[kind].capitalize()}: each head's role and {stat_name(drawn)}",
                    value_name=stat_name(drawn),
                    layer_name=layer_name,
                ),
                f"corpus_heads_{kind}",
            )
            hdf = pd.DataFrame(by_kind[kind])
            for j in range(3):
                hdf[f"example {j + 1}"] = [
                    explore_link(result.rows[r["examples"][j]], opts, model, **head_view(kind, r["layer"], r["head"]))
                    for r in by_kind[kind]
                ]
            hdf["first example"] = [sources[r["examples"][0]] for r in by_kind[kind]]
            hdf = hdf.drop(columns=["kind", "examples"] + ([] if kind == "cross" else ["agreement", "agreement_lift"]))
            if kind == "self":
                hdf = hdf.drop(columns=["eos"])
            cfg = {
                f"example {j + 1}": st.column_config.LinkColumn(f"example {j + 1}", display_text="Explore")
                for j in range(3)
            }
            cfg.update({s: st.column_config.NumberColumn(stat_name(s), help=STATS[s], format="%.3f") for s in STATS})
            cfg["role"] = st.column_config.TextColumn("role", help=" ".join(f"{k}: {v}." for k, v in ROLE_TEXT.items()))
            st.dataframe(hdf, hide_index=True, column_config=cfg, key=f"corpus_head_table_{kind}")


def second_choice(lm: LoadedModel, opts: DecodeOptions) -> tuple[LoadedModel, DecodeOptions] | None:
    """The second run the reader chose (its model and decoding), each choice in the link; None: none chosen, or one
    that cannot run (the page says why)."""
    from_url("corpus_vs", "vs", VERSUS, "")
    kind = st.radio("Second run", list(VERSUS), format_func=VERSUS.get, horizontal=True, key="corpus_vs")
    keep("corpus_vs")
    set_param("vs", kind, "")
    if kind == "beam":
        beams = range(1, MAX_BEAM + 1)
        from_url("corpus_vsbeam", "vsbeam", beams, VERSUS_BEAM, int)
        k = st.select_slider("The second run's beam width (1 = greedy)", options=list(beams), key="corpus_vsbeam")
        keep("corpus_vsbeam")
        set_param("vsbeam", str(k), "")
        if k == beam_of(opts):
            st.info("The second run is the first one again: choose another beam width.")
            return None
        return lm, decoding(k)
    set_param("vsbeam", "", "")
    if kind != "model":
        set_param("vsmodel", "", "")
        return None
    here = Path(lm.path).resolve()
    others = {p.name: p for p in offered_model_dirs() if p.resolve() != here}
    if not others:
        st.info("This server offers no other model directory to compare with.")
        return None
    from_url("corpus_vsmodel", "vsmodel", others, next(iter(others)))
    name = st.selectbox("The second model (with the page's decoding)", list(others), key="corpus_vsmodel")
    keep("corpus_vsmodel")
    set_param("vsmodel", name, "")
    try:
        return load_model(str(others[name])), opts
    except ModelDirError as e:
        st.error(md(f"Cannot load the model {name}: {e}"))
        return None


def set_param(param: str, value: str, default: str) -> None:
    if value == default:
        st.query_params.pop(param, None)
    else:
        st.query_params[param] = value


def render_versus(lm: LoadedModel, result: Analysis, corpus: Corpus, opts: DecodeOptions, digest: str) -> None:
    """The set translated a second time (another beam width, or another model with the page's decoding) against the
    analysed run: per-sentence chrF differences, the corpus scores with sacrebleu's paired bootstrap test (the same
    function as the CLI's ``--versus-beam`` and ``--versus-model``), and the sentences that changed most."""
    st.header("Against a second run")
    st.caption(
        "The same set translated a second time, by another decoding or another model, scored against the same "
        f"references. p: sacrebleu's paired bootstrap test over {BOOTSTRAP:,} resamples of the sentences, the chance "
        "of a difference this large between two runs that are equally good."
    )
    if corpus.references is None:
        st.info("Comparing two runs needs references: a TSV english⇥french, or a CSV with a french column.")
        return
    chosen = second_choice(lm, opts)
    if chosen is None:
        return
    other, opts_b = chosen
    names = run_names((opts, lm.path.name), (opts_b, other.path.name))
    first = [r["translation"] for r in result.rows]
    key = ("versus", lm.path.name, dir_stamp(str(lm.path)), opts, digest, str(other.path), dir_stamp(str(other.path)))
    work = lambda report: second_run(  # noqa: E731
        other.model, other.tokenizer, corpus.sources, corpus.references, first, opts_b, names, report
    )
    out = background((*key, opts_b), {"translating": 1.0}, work)
    if out is not None:
        show_versus(out, result.rows, (opts, lm.path.name), (opts_b, other.path.name))


def show_versus(
    out: dict, analysed: list[dict], run_a: tuple[DecodeOptions, str], run_b: tuple[DecodeOptions, str]
) -> None:
    """The two runs' corpus scores and p-values, the histogram of sentence chrF differences, the sentences that
    changed most (each opening Explore with either run's settings)."""
    a, b = out["runs"]
    cols = st.columns(2)
    for c, (key, label) in zip(cols, (("bleu", "BLEU"), ("chrf", "chrF"))):
        sc = out["corpus"][key]
        c.metric(f"Corpus {label}, {b}", f"{sc[b]:.2f}", delta=f"{sc['difference']:+.2f}")
        c.caption(md(f"{a}: {sc[a]:.2f}; p = {sc['p_value']:.4f}. sacrebleu signature: ") + f"`{sc['signature']}`")
    same = out["sentences"] - out["better"] - out["worse"]
    st.markdown(
        md(f"By sentence chrF, {b} is better on {sentences(out['better'])}, worse on {sentences(out['worse'])}")
        + md(f" and the same on {sentences(same)} of {out['sentences']:,}.")
    )
    show(
        difference_histogram(
            out["chrf_difference"],
            (a, b),
            title=f"Each sentence's chrF, {b} minus {a}",
            x_title="chrF difference of a sentence",
        ),
        "corpus_versus_histogram",
    )
    rows = changed_rows(out)
    if not rows:
        st.info("No sentence's chrF changed.")
        return
    st.subheader("The sentences that changed most")
    df = pd.DataFrame(rows)
    df["open_first"] = [explore_link(analysed[r["index"]], *run_a) for r in rows]
    df["open_second"] = [explore_link(analysed[r["index"]], *run_b) for r in rows]
    if run_a[1] == run_b[1]:  # one model, two decodings: Compare shows both on the sentence
        df.insert(df.columns.get_loc("difference") + 1, "compare", [
            two_runs_link(analysed[r["index"]], run_a[0], run_b[0], run_a[1]) for r in rows
        ])  # fmt: skip
    num = st.column_config.NumberColumn
    st.dataframe(
        df,
        hide_index=True,
        key="corpus_versus_table",
        column_config={
            "index": index_column(),
            "source": st.column_config.TextColumn("source", width="medium"),
            "first": st.column_config.TextColumn(a, width="medium"),
            "second": st.column_config.TextColumn(b, width="medium"),
            "chrf_first": score_column(f"chrF, {a}"),
            "chrf_second": score_column(f"chrF, {b}"),
            "difference": num("difference", help=f"sentence chrF, {b} − {a}", format="%+.1f"),
            "open_first": st.column_config.LinkColumn(
                f"open ({a})", help=f"this sentence in Explore, {a}", display_text="Explore"
            ),
            "open_second": st.column_config.LinkColumn(
                f"open ({b})", help=f"this sentence in Explore, {b}", display_text="Explore"
            ),
            "compare": st.column_config.LinkColumn(
                "both", help="this sentence in Compare, decoded both ways", display_text="Compare"
            ),
        },
    )


def head_view(kind: str, layer: int, head: int) -> dict[str, str]:
    """Explore's view of one head: a decoder head's weights (its stage, layer and head); an encoder head, which
    Explore draws in its encoder panel, removed in the head-ablation stage (what the sentence loses without it)."""
    if kind == "enc":
        return {"stage": "ablation", "ablate": keys.head("enc", layer, "self", head)}
    return {"stage": HEAD_STAGE[kind], "layer": str(layer), "head": str(head)}


def render(lm: LoadedModel | None, error: str | None) -> None:
    st.title(":material/table_chart: Corpus")
    st.markdown(
        "Translate a whole set and find the sentences the model gets wrong: one row per sentence with its scores "
        "and flags, plots over the set, and what each attention head does across it. Each sentence opens in "
        "Explore with the same settings."
    )
    if lm is None:
        st.error(md(error or "No model is loaded."))
        return
    raw, name, why = choose_input()
    opts = decoding_choice()
    st.caption(CREDITS)
    if raw is None:
        if why:
            st.info(why)
        return
    try:
        corpus = read_corpus(raw, name)
    except CorpusError as e:
        st.error(md(str(e)[0].upper() + str(e)[1:] + "."))
        return
    for msg in corpus.notes:
        st.warning(md(msg[0].upper() + msg[1:] + "."))
    st.caption(md(corpus.summary()[0].upper() + corpus.summary()[1:] + "."))
    heads = heads_choice(len(corpus.sources))
    digest = hashlib.sha256(raw).hexdigest()
    if not asked(f"{digest} {opts} {heads}"):
        return
    result = run_analysis(lm, corpus, opts, digest, heads)
    if result is None:
        return
    model = lm.path.name
    render_rows(result, corpus, opts, model, lm.path.resolve() == default_model_dir().resolve())
    render_summary(result, corpus, opts, model, digest)
    render_versus(lm, result, corpus, opts, digest)
    render_heads(result, opts, model)
    c1, c2 = st.columns(2)
    # Written when clicked (0.06 s and 1 MB for 1,000 sentences), not on every run of the page
    c1.download_button(
        "Download JSON (rows and heads)",
        lambda: dumps(report(result, corpus, opts, model)),
        "corpus.json",
        "application/json",
    )
    c2.download_button(
        "Download CSV (rows)", lambda: rows_csv(report(result, corpus, opts, model)), "corpus.csv", "text/csv"
    )


def heads_choice(sentences: int) -> int:
    """How many of the set's first sentences the head table reads: the link's ``heads`` (or this session's last
    choice), else HEAD_SENTENCES (the whole of a smaller set); the whole set is always offered, and a set no larger
    than the smallest size offered has no choice."""
    options = sorted({n for n in HEAD_CHOICES if n < sentences} | {sentences})
    default = min(HEAD_SENTENCES, sentences)
    if len(options) == 1:
        st.query_params.pop("heads", None)
        return sentences
    from_url("corpus_heads", "heads", options, default, int)
    if st.session_state["corpus_heads"] not in options:  # kept from a set of another size
        st.session_state["corpus_heads"] = default
    heads = st.select_slider(
        "Head table over the first … sentences",
        options=options,
        key="corpus_heads",
        format_func=lambda n: f"{n:,} (all)" if n == sentences else f"{n:,}",
        help=(
            "The head table (the page's last section) takes most of the analysis's time: each head is removed in "
            f"turn on every sentence it reads. Over more than {FAST_ABOVE} sentences its removals run in bfloat16 "
            "where the processor multiplies it natively, which the table then says."
        ),
    )
    keep("corpus_heads")
    if heads == default:
        st.query_params.pop("heads", None)
    else:
        st.query_params["heads"] = str(heads)
    return heads


def asked(key: str) -> bool:
    """Whether the reader asked for this analysis (``key``: its set and settings): the button, or a link with
    ``run=1`` (which the button writes) opening the page in a new session. Opening the page, or changing its set or
    settings, translates nothing until asked (a slider moved to 1,000 sentences starts nothing); an analysis asked for
    once comes back without asking, across pages too."""
    done: set[str] = st.session_state.setdefault(KEPT + RUN, set())
    if key not in done and (done or st.query_params.get(RUN) != "1"):
        st.query_params.pop(RUN, None)
        if not st.button("Translate and analyse", type="primary", key="corpus_go"):
            st.caption("Nothing is translated until you ask.")
            return False
    done.add(key)
    st.query_params[RUN] = "1"
    return True


def rows_csv(r: dict) -> str:
    buf = io.StringIO()
    write_csv(r["rows"], buf)
    return buf.getvalue()
