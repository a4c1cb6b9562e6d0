"""Corpus analysis timings: every per-sentence column and flag of Multi30k test 2016 (greedy), the head table over
its first 1,000 sentences, the whole set with its head table and two runs compared through the CLI, and a cached set
reopened by the Corpus page.

    python benchmarks/corpus.py [--model DIR] [--data DIR] [--limit N] [--threads 2] [--head-sentences 1000]
        [--parts rows,cli,heads,all,whole,versus,page,browser,sort,precision,bar] [--smoke]

Targets: the rows of the 1,000 sentences ≤ 60 s on 2 cores (in process, as the page runs it, and through
``python -m model corpus --no-heads --json``, as the CLI runs it); the head table over 1,000 sentences ≤ 60 s; the
whole set with its head table through ``python -m model corpus --json`` ≤ 90 s (the table over its first 200
sentences, as the CLI reads it by default; and over all of them, ``--head-sentences 1000``); greedy against beam 5
through ``python -m model corpus --no-heads --versus-beam 5 --json`` ≤ 90 s. Each measure prints its wall-clock
seconds and the CPU seconds the run used (the process's, or the CLI child's), which a busy machine inflates less. The
page run that reopens a cached set ≤ 1 s: the page script's own time in Streamlit's AppTest (the whole page: table,
plots, head grids), and in Chromium to the page painted (the table drawn, every figure in or near view drawn, the head
section there), from opening the page's link in a fresh browser context (which includes Streamlit's own start of the
page: its code loaded and run, the WebSocket opened; the median of 5, printed beside the floor page's, a Streamlit
page of one button and one heatmap opened the same way) and from choosing the set again on the open page after pasting
was chosen (the median of 5); and sorting the page's table of 5,000 sentences (the first 5,000 of Multi30k's training
set, pasted) ≤ 0.5 s in Chromium, from a click on a column header to the new order shown (the median of 6 clicks; the
``sort`` part, not run by default). A head table over more than 200 sentences runs its removals in the device's
precision (bfloat16 where it multiplies it natively); the ``precision`` part (not run by default) runs the head table
again in float32 and prints how far tables of each size are from float32's. The ``bar`` part (not run by default)
analyses the set as the page does (on the app's threads: DECODER_LENS_THREADS, else one), with its head table over its
first 200 sentences and over ``--head-sentences``, and prints how far the page's progress bar strays from the share of
the time spent. Prints a table and one verdict line per target; asserts nothing. ``--smoke`` runs the tiny random
model on a few made-up sentences.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROWS_TARGET_S, HEADS_TARGET_S, WHOLE_TARGET_S, REOPEN_TARGET_S = 60.0, 60.0, 90.0, 1.0
SMOKE_SENTENCES = ["the cat sat on the mat", "a dog runs in the park", "two men are talking"] * 3


def page_script(model_dir: str, data_dir: str, size: int) -> None:
    """The Corpus page on a bundled set, as AppTest runs it."""
    from pathlib import Path as P

    from model.io.checkpoint import load_model_dir
    from model.train import data
    from views.corpus import render

    data.default_data_dir = lambda: P(data_dir)
    render(load_model_dir(model_dir), None)


PAINTED_JS = """(heading) => !document.querySelector('[data-testid="stStatusWidget"]')
    && [...document.querySelectorAll('h2, h3')].some(h => h.textContent.includes(heading))
    && [...document.querySelectorAll('.decoder-lens-plot')].every(d => d._fullLayout || d.dataset.deferred)
    && document.querySelectorAll('.js-plotly-plot').length > 0
    && document.querySelector('[data-testid="stDataFrame"] canvas') !== null"""
HEADS_HEADING = "What each head does over the set"  # the page's last section
REOPENS = 5  # times the cached set is chosen again on the open page: the median is reported


def reopen_in_browser(model_dir, size: int, tmp: Path) -> tuple[float, float, float]:
    """Seconds to the page painted (the table drawn, every figure in or near view drawn, the head section there) for
    a set the server analysed before (its link opened once first, and that analysis waited for): from opening the
    page's link in a fresh browser context (Streamlit's own start included; the median of REOPENS); from choosing
    the set again on the page, after another choice of input (pasting) has taken its place (the median of REOPENS);
    and, for scale, the floor page (``benchmarks/floor_app.py``: one button, one heatmap) opened in a fresh context
    the same way, each after the Corpus page's (the least any Streamlit page with a figure takes to paint here)."""
    from playwright.sync_api import sync_playwright

    from harness.browser import BROWSER_ARGS, CHROMIUM, DRAWN_JS, IDLE_JS, ROOT, app_env, serve
    from views.corpus import SETS

    link = f"/corpus?set=multi30k&n={min(size, 1000)}&run=1"
    with (
        serve(ROOT / "app.py", tmp / "server.log", app_env(model_dir)) as server,
        serve(ROOT / "benchmarks" / "floor_app.py", tmp / "floor.log", {}) as floor,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.goto(server.url + link)
            page.wait_for_function(PAINTED_JS, arg=HEADS_HEADING, timeout=1_800_000, polling=100)
            page.context.close()
            fresh, floors = [], []
            for _ in range(REOPENS):
                for url, done, arg, out in (
                    (server.url + link, PAINTED_JS, HEADS_HEADING, fresh),
                    (floor.url + "/?rows=12&cols=12", DRAWN_JS, 1, floors),
                ):
                    page = browser.new_page(viewport={"width": 1366, "height": 768})
                    t0 = time.perf_counter()
                    page.goto(url)
                    page.wait_for_function(done, arg=arg, timeout=120_000, polling="raf")
                    out.append(time.perf_counter() - t0)
                    page.context.close()
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.goto(server.url + link)
            page.wait_for_function(PAINTED_JS, arg=HEADS_HEADING, timeout=120_000, polling="raf")
            again = []
            for _ in range(REOPENS):
                page.locator("label").filter(has_text=SETS["paste"]).click()
                page.locator(".st-key-corpus_paste textarea").wait_for(timeout=60_000)
                page.wait_for_function(IDLE_JS, timeout=60_000)
                t0 = time.perf_counter()
                page.locator("label").filter(has_text=SETS["multi30k"]).click()
                page.wait_for_function(PAINTED_JS, arg=HEADS_HEADING, timeout=120_000, polling="raf")
                again.append(time.perf_counter() - t0)
            return median(fresh), median(again), median(floors)
        finally:
            browser.close()


SORT_ROWS = 5_000
SORT_TARGET_S = 0.5
SORTS = 3  # cycles of the header's three states: 6 timed sorts
# The first row the sentence table shows, as its accessible grid reads it (Streamlit's data grid keeps one for the
# rows in view).
FIRST_ROW_JS = """() => {
  const row = document.querySelectorAll('.st-key-corpus_table [role=row]')[1];
  return row ? row.querySelector('[role=gridcell]')?.textContent ?? null : null;
}"""


def reopen_in_apptest(model_dir, data_dir, size: int) -> float:
    """Seconds of the Corpus page's run (Streamlit's AppTest) reopening a set the server analysed before."""
    from streamlit.testing.v1 import AppTest

    from views.corpus import analysis_jobs

    at = AppTest.from_function(page_script, args=(str(model_dir), str(data_dir), size), default_timeout=900)
    at.query_params.update({"set": "multi30k", "n": str(min(size, 1000)), "run": "1"})
    at.run()  # starts analysing the set (and its head table) on the page's server thread
    for job in list(analysis_jobs().values()):
        job.future.result(timeout=1800)
    at.run()  # takes the finished analysis, which the server keeps
    t0 = time.perf_counter()
    at.run()
    if at.exception:
        print(f"page error: {at.exception}")
    return time.perf_counter() - t0


def sort_in_browser(model_dir, pairs, tmp: Path) -> float:
    """Median seconds from a click on the sentence table's "#" header to the table showing the new order (6 clicks),
    on a set of ``len(pairs)`` sentences pasted on the page: the table sorted in the browser, as a user sorting a
    large set waits for it."""
    from playwright.sync_api import sync_playwright

    from harness.browser import BROWSER_ARGS, CHROMIUM, ROOT, app_env, serve

    text = "".join(f"{en}\t{fr}\n" for en, fr in pairs)
    with serve(ROOT / "app.py", tmp / "sort-server.log", app_env(model_dir)) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.goto(server.url + "/corpus?set=paste&run=1")
            box = page.locator(".st-key-corpus_paste textarea")
            box.wait_for(timeout=300_000)  # the server's first page loads the model
            box.fill(text, timeout=120_000)
            box.press("Control+Enter")
            page.get_by_role("heading", name=HEADS_HEADING).wait_for(timeout=1_800_000)
            page.wait_for_function(f"() => ({FIRST_ROW_JS})() === '0'", timeout=120_000)
            page.locator(".st-key-corpus_table").scroll_into_view_if_needed()
            grid = page.locator(".st-key-corpus_table canvas").first.bounding_box()
            header = (grid["x"] + 70, grid["y"] + 17)  # the "#" column's header (after the selection column)
            times = []
            for _ in range(SORTS):
                # A header's clicks cycle: ascending (here, the order shown), descending, as given. The last two
                # change the first row: each is timed.
                page.mouse.click(*header)
                time.sleep(0.5)
                for _ in range(2):
                    shown = page.evaluate(FIRST_ROW_JS)
                    t0 = time.perf_counter()
                    page.mouse.click(*header)
                    page.wait_for_function(f"() => ({FIRST_ROW_JS})() !== {shown!r}", timeout=60_000, polling="raf")
                    times.append(time.perf_counter() - t0)
            return sorted(times)[len(times) // 2]
        finally:
            browser.close()


def cli_run(pairs: list[tuple[str, str]], model_dir, tmp: Path, extra: list[str]) -> tuple[float, float]:
    """``python -m model corpus`` on the set (a temporary TSV, removed with ``tmp``): (wall-clock seconds, the child's
    CPU seconds)."""
    tsv = tmp / "set.tsv"
    tsv.write_text("".join(f"{en}\t{fr}\n" for en, fr in pairs), encoding="utf-8")
    cli = [sys.executable, "-m", "model", "corpus", str(tsv), "--model", str(model_dir), *extra]
    cli += ["--json", str(tmp / "out.json")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cli, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        print(f"the CLI failed: {proc.stderr.strip().splitlines()[-1:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--data", type=Path, default=None, help="corpus directory (default <repo>/../shared/data)")
    ap.add_argument("--limit", type=int, default=1000, help="sentences of Multi30k test 2016 (default: all 1,000)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--head-sentences", type=int, default=1000, help="the head table's sentences (default: 1,000)")
    ap.add_argument(
        "--parts",
        default="rows,cli,heads,all,whole,versus,page,browser",
        help="which measures to take (default: all but sort)",
    )
    ap.add_argument("--smoke", action="store_true", help="tiny random model, a few sentences")
    return ap.parse_args()


def precision(model, srcs, refs, table: dict, report) -> None:
    """The head table again in float32, and how far ``table``'s loss increases (run in the device's precision,
    ``removal_dtype``) are from it, each head's mean over tables of each size: the first n sentences and the worst
    of 50 random draws of n, n from a few sentences to all; tables over more than FAST_ABOVE sentences (the ones run
    in that precision) against REMOVAL_TOLERANCE."""
    import numpy as np
    import torch

    from model.interpret.corpus import FAST_ABOVE, KINDS, REMOVAL_TOLERANCE, head_table

    if table["precision"] == "float32":
        print("  this table ran in float32: nothing to compare")
        return
    t0, c0 = time.perf_counter(), time.process_time()
    exact = head_table(model, srcs, refs, dtype=torch.float32)
    report("  the same in float32", time.perf_counter() - t0, time.process_time() - c0)

    def losses(t: dict) -> np.ndarray:  # (N, layers of the three kinds, H): each sentence's loss increases
        return np.concatenate([t["per_sentence"][k]["loss_increase"] for k in KINDS], 1)

    d = losses(table) - losses(exact)
    q = np.quantile(np.abs(d), [0.5, 0.99])
    print(
        f"  one sentence's loss increase: |difference| median {q[0]:.5f}, 99th percentile {q[1]:.5f}, "
        f"largest {np.abs(d).max():.4f}"
    )
    same = all((table[k][r] == exact[k][r]).all() for k in KINDS for r in ("role", "examples"))
    print(f"  roles and examples the same: {same}")
    rng = np.random.default_rng(0)
    worst = 0.0
    for n in sorted({5, 12, 50, FAST_ABOVE, FAST_ABOVE + 1, 500, len(srcs)}):
        if n > len(srcs):
            continue
        first = float(np.abs(d[:n].mean(0)).max())
        draws = max(float(np.abs(d[rng.choice(len(srcs), n, replace=False)].mean(0)).max()) for _ in range(50))
        if n > FAST_ABOVE:
            worst = max(worst, first, draws)
        print(
            f"  a table over {n:>4} sentences: largest |difference| of a head's mean {first:.5f} (the first {n}), "
            f"{draws:.5f} (the worst of 50 random draws){'' if n > FAST_ABOVE else '  (runs in float32)'}"
        )
    verdict = "yes" if worst <= REMOVAL_TOLERANCE else "NO"
    print(
        f"  tables over more than {FAST_ABOVE} sentences within the stated {REMOVAL_TOLERANCE:g}: {verdict} "
        f"({worst:.5f})"
    )


def bar_against_clock(lm, corpus, opts, heads: int, lexicon) -> tuple[float, float]:
    """One analysis as the page runs it, each progress report's bar (``done_share`` with the page's ``analysis_costs``)
    against the share of the time spent by then: (the largest gap, the seconds)."""
    from model.interpret.corpus import analyse
    from views.corpus import analysis_costs, done_share

    costs = analysis_costs(lm, len(corpus.sources), heads)
    log: list[tuple[float, float]] = []  # (seconds spent, the bar's share)
    t0 = time.perf_counter()
    analyse(
        lm.model,
        lm.tokenizer,
        corpus,
        opts,
        heads,
        progress=lambda done, total, what: log.append((time.perf_counter() - t0, done_share(done, total, what, costs))),
        lexicon=lexicon,
    )
    spent = time.perf_counter() - t0
    return max(abs(share - at / spent) for at, share in log), spent


def print_bar(lm, corpus, opts, n_heads: int, threads_after: int) -> None:
    """``bar_against_clock`` on the app's threads (DECODER_LENS_THREADS, else one), with the page's default head table
    and with one over ``n_heads`` sentences; then ``threads_after`` threads again."""
    from model.core.constants import HEAD_SENTENCES
    from model.interpret.lexicon import of_model
    from model.io.checkpoint import set_threads, use_threads

    threads = set_threads()
    for heads in sorted({min(HEAD_SENTENCES, len(corpus.sources)), n_heads}):
        gap, spent = bar_against_clock(lm, corpus, opts, heads, of_model(lm.path))
        print(
            f"measure, not a verdict: the page's progress bar over an analysis with its head table over {heads:,} "
            f"sentences ({spent:.1f} s, {threads} thread{'s' * (threads > 1)} as the app runs) strays at most "
            f"{gap:.3f} from the share of the time spent"
        )
    use_threads(threads_after)


def print_verdicts(results: dict[str, float], n_heads: int) -> None:
    """Each measure taken against its target; a part not measured says so."""
    for name, key, target in (
        ("rows in process ≤ 60 s", "rows, every column and flag (in process)", ROWS_TARGET_S),
        ("rows through the CLI ≤ 60 s", "rows through the CLI (python -m model corpus)", ROWS_TARGET_S),
        (f"head table over {n_heads} ≤ 60 s", f"head table over {n_heads} sentences", HEADS_TARGET_S),
        ("the set with its head table ≤ 90 s", "the set with its head table through the CLI", WHOLE_TARGET_S),
        (
            "the set with a head table over it all ≤ 90 s",
            "the set with a head table over it all through the CLI",
            WHOLE_TARGET_S,
        ),
        ("greedy against beam 5 ≤ 90 s", "greedy against beam 5 through the CLI", WHOLE_TARGET_S),
        ("cached reopen ≤ 1 s (page run)", "page run reopening the cached set (AppTest)", REOPEN_TARGET_S),
        ("cached reopen ≤ 1 s to painted", "page reopening the cached set, to painted (Chromium)", REOPEN_TARGET_S),
        (
            "cached set chosen again ≤ 1 s to painted",
            "  chosen again on the page, to painted (Chromium)",
            REOPEN_TARGET_S,
        ),
        (
            f"sorting {SORT_ROWS:,} rows ≤ 0.5 s",
            f"sorting the table of {SORT_ROWS:,} sentences (Chromium)",
            SORT_TARGET_S,
        ),
    ):
        got = results.get(key)
        verdict = "n/a" if got is None else "PASS" if got <= target else "FAIL"
        print(f"verdict {name}: {verdict} ({'not measured' if got is None else f'{got:.2f} s'})")
    fresh = results.get("page reopening the cached set, to painted (Chromium)")
    floor = results.get("  the floor page, fresh, to painted (Chromium)")
    if fresh and floor:
        print(
            f"measure, not a verdict: the cached set reopened in a fresh browser context, {fresh:.2f} s = "
            f"{fresh / floor:.2f}x the floor page opened the same way ({floor:.2f} s: Streamlit's own start)"
        )


def main() -> None:
    a = parse_args()

    from model.decode.decoding import DecodeOptions
    from model.interpret.corpus import Corpus, analyse, head_table
    from model.interpret.lexicon import of_model
    from model.io.checkpoint import default_model_dir, load_model_dir, use_threads
    from model.testing import build_tiny_model_dir
    from model.train.data import MULTI30K_TESTS, default_data_dir, load_multi30k_test

    use_threads(a.threads)
    tmp = Path(tempfile.mkdtemp(prefix="corpus-bench-"))
    if a.smoke:
        model_dir = build_tiny_model_dir(tmp / "tiny")
        pairs = [(s, s) for s in SMOKE_SENTENCES]
        opts = DecodeOptions(max_len=12)
    else:
        model_dir = a.model or default_model_dir()
        pairs = load_multi30k_test(a.data or default_data_dir(), MULTI30K_TESTS[0])[: a.limit]
        opts = DecodeOptions()
    lm = load_model_dir(model_dir)
    corpus = Corpus([en for en, _ in pairs], [fr for _, fr in pairs])
    analyse(lm.model, lm.tokenizer, Corpus(corpus.sources[:2], None), opts, heads=0)  # compile the decoder step

    parts = set(a.parts.split(","))
    what = "made-up sentences" if a.smoke else "Multi30k test 2016"
    print(f"model: {lm.path.name}; {len(pairs):,} sentences ({what}), {a.threads} threads", flush=True)
    n_heads = min(a.head_sentences, len(pairs))
    results = {}
    print(f"{'':<52}{'wall s':>10}{'CPU s':>10}")

    def report(name: str, seconds: float, cpu: float | None = None) -> None:
        results[name] = seconds
        print(f"{name:<52}{seconds:>10.2f}{'' if cpu is None else f'{cpu:>10.1f}'}", flush=True)

    if "rows" in parts:
        t0, c0 = time.perf_counter(), time.process_time()
        res = analyse(lm.model, lm.tokenizer, corpus, opts, heads=0, lexicon=of_model(lm.path))  # as the page
        report("rows, every column and flag (in process)", time.perf_counter() - t0, time.process_time() - c0)
        for part, seconds in res.seconds.items():
            report(f"  of which {part}", seconds)
    for part, name, extra in (
        ("cli", "rows through the CLI (python -m model corpus)", ["--no-heads"]),
        ("all", "the set with its head table through the CLI", []),
        ("whole", "the set with a head table over it all through the CLI", ["--head-sentences", str(len(pairs))]),
        ("versus", "greedy against beam 5 through the CLI", ["--no-heads", "--versus-beam", "5"]),
    ):
        if part in parts:
            report(name, *cli_run(pairs, model_dir, tmp, extra))
    if parts & {"heads", "precision"}:
        from model.decode.decoding import prepare_ids

        cfg, tok = lm.cfg, lm.tokenizer
        srcs = [prepare_ids(tok.encode(s), cfg.eos_id, cfg.max_len) for s in corpus.sources[:n_heads]]
        refs = [tok.encode(r)[: cfg.max_len - 1] + [cfg.eos_id] for r in corpus.references[:n_heads]]
        t0, c0 = time.perf_counter(), time.process_time()
        table = head_table(lm.model, srcs, refs)
        report(f"head table over {n_heads} sentences", time.perf_counter() - t0, time.process_time() - c0)
        print(f"  its head removals in {table['precision']}")
        if "precision" in parts:
            precision(lm.model, srcs, refs, table, report)
    if "bar" in parts:
        print_bar(lm, corpus, opts, n_heads, a.threads)
    data_dir = a.data or default_data_dir()
    if "page" in parts and not a.smoke and Path(data_dir).is_dir():
        report("page run reopening the cached set (AppTest)", reopen_in_apptest(model_dir, data_dir, len(pairs)))
    if "browser" in parts and not a.smoke and Path(data_dir).is_dir():
        fresh, again, floor = reopen_in_browser(model_dir, len(pairs), tmp)
        report("page reopening the cached set, to painted (Chromium)", fresh)
        report("  chosen again on the page, to painted (Chromium)", again)
        report("  the floor page, fresh, to painted (Chromium)", floor)
    if "sort" in parts and not a.smoke and Path(data_dir).is_dir():
        from model.train.data import read_multi30k

        train = read_multi30k(Path(data_dir) / "multi30k", "train")[:SORT_ROWS]
        report(f"sorting the table of {len(train):,} sentences (Chromium)", sort_in_browser(model_dir, train, tmp))
    print_verdicts(results, n_heads)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
