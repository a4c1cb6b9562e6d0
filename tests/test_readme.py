"""The README is a front door: short, one screenshot per page (each taken by harness/screenshots.py and small), its
test command the one CI runs, and every link of it and of docs/ leading to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

from harness.screenshots import OUT, SHOTS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250
MAX_PNG_BYTES = 300_000
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move what is not the front door to docs/"


def test_one_screenshot_per_page_each_taken_by_the_script_and_small():
    pages = re.findall(r'Page\("(\w+)"', (ROOT / "views" / "main.py").read_text())
    shown = re.findall(r"!\[[^\]]*\]\(assets/screenshots/([\w-]+)\.png\)", README.read_text())
    assert len(pages) >= 6 and sorted(shown) == sorted(p.lower() for p in pages), (pages, shown)
    assert sorted(shown) == sorted(s.name for s in SHOTS), "harness/screenshots.py takes another set of pictures"
    for name in shown:
        size = (OUT / f"{name}.png").stat().st_size
        assert size <= MAX_PNG_BYTES, f"{name}.png is {size} bytes"


def test_ci_runs_the_readmes_test_command():
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    command = next(b.strip() for b in blocks if "pytest" in b)
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_link_of_the_readme_and_the_docs_leads_to_a_file():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    assert len(pages) >= 8
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages
        for target in LINK.findall(page.read_text())
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert broken == []
