"""The question explorer at scale: a report's explorer page opened and filtered in headless Chromium, against the
report's own page opened in the same browser (the peer: what a reader waits for already).

    python benchmarks/explorer_scale.py REPORT_FOLDER --benchmark prost --runs 5

Timed, min/median/max over ``--runs`` fresh pages: ``open``, from navigation to the explorer's first page of rows
drawn (its ``body[data-ready]``; ``performance.now()`` at that moment, the page's own clock from navigation start);
``filter``, each of a status filter, a discordant filter (runs 0 and 1) and a text search, from the change to its
rows drawn (``performance.now()`` around the page's own handler); the report page's ``open`` for the ratio. Sizes:
the explorer file and the report folder's files it adds (``explore/``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
FILTERS = {
    "status wrong of run 0": "$('run').value='0'; $('status').value='W'; $('status').onchange();",
    "discordant runs 0, 1": "$('run').value=''; $('status').value=''; $('a').value='0'; $('b').value='1'; "
    "$('discordant').value='both'; $('discordant').onchange();",
    "text search 'roll'": "$('discordant').value=''; $('q').value='roll'; $('q').oninput();",
}


def spread(values: list[float]) -> str:
    return f"min {min(values):.0f} / median {statistics.median(values):.0f} / max {max(values):.0f} ms"


def measure(page_of, url: str, timed: str | None) -> float:
    page = page_of()
    page.goto(url)
    if timed is None:  # the report page: loaded
        page.wait_for_load_state("load")
        found = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    else:
        page.wait_for_selector("body[data-ready='1']")
        found = page.evaluate(f"(() => {{ const t = performance.now(); {timed} return performance.now() - t; }})()") if timed else \
            page.evaluate("performance.now()")  # fmt: skip
    page.close()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--benchmark", default="prost")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright import sync_api

    explorer = args.report / "explore" / f"{args.benchmark}.html"
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, headless=True, args=ARGS)
        page_of = lambda: browser.new_page(viewport={"width": 1400, "height": 900})  # noqa: E731
        report = [measure(page_of, (args.report / "report.html").as_uri(), None) for _ in range(args.runs)]
        opened = [measure(page_of, explorer.as_uri(), "") for _ in range(args.runs)]
        page = page_of()
        page.goto(explorer.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        questions = page.evaluate("Q.length")
        filtered = {}
        for name, script in FILTERS.items():
            filtered[name] = [page.evaluate(f"(() => {{ const t = performance.now(); const $ = id => document.getElementById(id); "
                                            f"{script} return performance.now() - t; }})()") for _ in range(args.runs)]  # fmt: skip
            filtered[name].append(float(page.get_attribute("#count", "data-count")))
        browser.close()
    added = sum(p.stat().st_size for p in (args.report / "explore").iterdir())
    print(
        f"explorer {explorer.name}: {questions} questions, {explorer.stat().st_size / 1e6:.2f} MB; explore/ adds {added / 1e6:.2f} MB"
    )
    print(
        f"open explorer: {spread(opened)}; open report.html: {spread(report)}; ratio {statistics.median(opened) / statistics.median(report):.2f}"
    )
    for name, times in filtered.items():
        print(f"filter {name}: {spread(times[:-1])} ({times[-1]:.0f} questions shown)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
