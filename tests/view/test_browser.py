"""``samplehooks view`` pages in a real headless Chromium (Debian's ``chromium`` package).

Playwright drives ``/usr/bin/chromium`` (installed by ``.ci/run``; no browser download).
Each test opens a page written by the CLI from a ``file://`` URL and checks what a user
sees: no console error, no request beyond the file, charts drawn, a filter, a sort, a
prompt's timeline, and two runs compared.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sampling_core.cli import app
from sampling_core.runs import rescore_sync
from sampling_core.view import data as view_data
from tests.support.runs_helpers import records, write_config
from tests.support.view_helpers import MIXED, make_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium), "
            "as .ci/run does"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


class Opened:
    """A page, with every console message, page error and request seen while it was open."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1366, "height": 900})
        self.messages: list[tuple[str, str]] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.messages.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.messages.append(("pageerror", str(e))))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready='1']")

    def clean(self) -> None:
        errors = [m for m in self.messages if m[0] in ("error", "pageerror", "warning")]
        assert errors == []
        assert self.requests == [self.url]  # the file itself, nothing else

    def rows(self) -> list[list[str]]:
        return self.page.eval_on_selector_all(
            "#prompts tbody tr",
            "trs => trs.map(tr => [...tr.children].map(td => td.textContent))",
        )


def view(*args: Path) -> Path:
    out = args[0].parent / f"{'-'.join(a.name for a in args)}.html"
    result = CliRunner().invoke(app, ["view", *map(str, args), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_a_run_page_draws_its_charts_filters_sorts_and_shows_a_timeline(
    browser: Any, tmp_path: Path
) -> None:
    run = make_run(tmp_path, "a", count=8)
    opened = Opened(browser, view(run))
    page = opened.page
    for chart in ("outcomes", "budget", "passk", "latency", "tokens"):
        assert page.locator(f"#chart-{chart} svg").count() == 1, chart
    assert page.locator("#chart-outcomes rect.bar").count() == 4
    # k = 1, 2, 4 of pass@k (solid) and of pass^k (dashed)
    assert page.locator("#chart-passk circle.point").count() == 6
    assert page.locator("#chart-passk line.interval").count() == 6
    assert page.locator("#chart-passk polyline.dashed").count() == 1
    assert "Cost unknown" in page.inner_text("#chart-cost")

    by_key = {r["key"]: r for r in records(run)}
    assert len(opened.rows()) == 8
    page.select_option("#filter-status", "failed")
    failed = sorted(k for k, r in by_key.items() if r["status"] == "failed")
    assert failed == ["p0", "p4"]
    assert [row[0] for row in opened.rows()] == failed
    assert page.inner_text("#shown") == "2 of 8 prompts shown"
    page.select_option("#filter-status", "")
    page.select_option("#filter-unmet", "contains 'zebra'")
    assert [row[0] for row in opened.rows()] == failed
    page.select_option("#filter-unmet", "")
    page.fill("#filter-text", "p1")
    assert [row[0] for row in opened.rows()] == ["p1"]
    page.fill("#filter-text", "")

    page.click("#prompts th[data-col='passes']")  # numbers sort largest first
    passes = [int(row[3]) for row in opened.rows()]
    assert passes == sorted(passes, reverse=True) and passes[0] > passes[-1]
    page.click("#prompts th[data-col='passes']")
    assert [int(row[3]) for row in opened.rows()] == sorted(passes)

    page.click("#prompts tbody tr[data-key='p0']")
    assert page.locator("#timeline .lane").count() == 4  # one lane per subsample
    assert page.locator("#timeline .step.failed").count() == 4
    assert "contains 'zebra'" in page.inner_text("#timeline")
    page.click("#prompts tbody tr[data-key='p1']")
    outcomes = page.eval_on_selector_all(
        "#timeline .lane .step", "s => s.map(x => x.className.split(' ')[1])"
    )
    each = sorted(by_key["p1"]["attempts"]["each"], key=lambda e: e["subsample"])
    assert outcomes == ["passed" if e["passed"] else "failed" for e in each]
    opened.clean()
    page.close()


def test_a_run_whose_answers_vote_draws_maj_at_k(browser: Any, tmp_path: Path) -> None:
    run = make_run(
        tmp_path,
        "m",
        count=4,
        strategy="majority",  # answers grouped: maj@k
        budgets={"loop_budget": 1, "concurrency_budget": 3, "early_exit": False},
    )
    opened = Opened(browser, view(run))
    page = opened.page
    # k = 1, 2 of pass@k and pass^k; 1, 2 and 3 (all the samples) of maj@k (dotted)
    assert page.locator("#chart-passk circle.point").count() == 7
    assert page.locator("#chart-passk polyline[stroke-dasharray='1 3']").count() == 1
    labels = page.eval_on_selector_all("#chart-passk svg text", "t => t.map(x => x.textContent)")
    assert {"1", "2", "3"} <= set(labels)
    assert "dotted: maj@k" in page.inner_text("#chart-passk")
    opened.clean()
    page.close()


def by_length(text: str) -> float:
    """a vote weight: longer answers weigh more"""
    return float(len(text))


def test_maj_at_k_beside_a_weighted_vote_says_unweighted(browser: Any, tmp_path: Path) -> None:
    budgets = {"loop_budget": 1, "concurrency_budget": 3, "early_exit": False}
    counted = make_run(tmp_path, "counted", count=4, strategy="majority", budgets=budgets)
    weight = {"kind": "python", "function": f"{__name__}:by_length"}
    weighted = make_run(
        tmp_path,
        "weighted",
        count=4,
        strategy={"name": "majority", "weight": weight},
        budgets=budgets,
    )
    opened = Opened(browser, view(counted, weighted))
    page = opened.page
    labels = page.eval_on_selector_all(
        "#verdict-table tbody tr td:first-child", "t => t.map(x => x.textContent)"
    )
    assert "maj@1 unweighted" in labels and "maj@1" not in labels
    caption = page.inner_text("#chart-passk")
    assert "weighted: maj@k unweighted (each sample counted once" in caption
    assert "counted: maj@k unweighted" not in caption
    opened.clean()
    page.close()


def test_a_rescore_whose_outcomes_are_not_known_shows_them_apart(
    browser: Any, tmp_path: Path
) -> None:
    run = make_run(tmp_path, "kept", count=4)  # no log-probabilities kept
    out = tmp_path / "rescored"
    added = [{"min_confidence": 0.5}]
    with ThreadPoolExecutor(1) as pool:  # a run of its own, beside Playwright's event loop
        pool.submit(rescore_sync, run, out, requirements=added).result()
    opened = Opened(browser, view(out))
    page = opened.page
    titles = page.eval_on_selector_all(
        "#chart-outcomes rect.bar title", "t => t.map(x => x.textContent)"
    )
    assert any(t.startswith("not known") for t in titles)
    assert "prompts not known" in page.inner_text("#cards")
    opened.clean()
    page.close()


def test_the_compare_page_shows_the_verdict_the_flipped_prompts_and_both_runs_attempts(
    browser: Any, tmp_path: Path
) -> None:
    a = make_run(tmp_path, "a", count=16)  # p0, p4, p8, p12 need a zebra: they fail
    b = make_run(
        tmp_path,
        "b",
        count=16,
        backend={"kind": "scripted", "replies": ["a zebra"]},
        budgets={"loop_budget": 2, "concurrency_budget": 1},
    )
    opened = Opened(browser, view(a, b))
    page = opened.page
    assert page.locator("#compare").is_visible()
    # the paired verdict, with its interval drawn
    success = page.locator("#verdict-table tr[data-measure='success_rate']")
    cells = success.locator("td").all_inner_texts()
    assert cells[:3] == ["success_rate", "75.0%", "100.0%"]
    assert cells[3] == "+25.0" and cells[6] == "B is better"
    assert float(cells[7]) == pytest.approx(0.125)  # McNemar: 0 against 4, 2 / 2**4
    assert success.locator("svg.interval-bar circle").count() == 1
    assert "16 prompts in both runs" in page.inner_text("#verdict-notes")
    # the prompts that flipped, each way
    flipped = page.eval_on_selector_all("#flipped-b tbody tr", "t => t.map(r => r.dataset.key)")
    assert flipped == ["p0", "p12", "p4", "p8"]  # failed in a, ok in b (by key)
    assert "ok in b only (4)" in page.inner_text("#flipped-b-title")
    assert page.inner_text("#flipped-a tbody") == "None."
    # one of them, both runs' attempts side by side
    page.click("#flipped-b tbody tr[data-key='p4']")
    left, right = (
        page.locator("#pair-box .pair > div[data-run='0']"),
        page.locator("#pair-box .pair > div[data-run='1']"),
    )
    assert left.locator(".lane").count() == 4 and left.locator(".step.failed").count() == 4
    assert "must contain 'zebra'" in left.inner_text()
    assert right.locator(".lane").count() == 1 and right.locator(".step.passed").count() == 1
    # the side-by-side figures, the charts, and the prompts table of either run
    head = page.inner_text("#compare-table thead")
    assert "a" in head and "b" in head
    assert "pass@1" in page.inner_text("#compare-table")
    assert page.locator("#chart-outcomes rect.bar").count() == 8  # 4 outcomes x 2 runs
    page.select_option("#run-select", "1")
    assert {row[1] for row in opened.rows()} == {"ok"}
    page.click("#prompts tbody tr[data-key='p0']")  # both runs' attempts, side by side
    assert page.locator("#timeline .pair > div[data-run='0'] .lane").count() == 4
    assert page.locator("#timeline .pair > div[data-run='1'] .lane").count() == 1
    opened.clean()
    page.close()


def test_a_run_in_progress_without_events_still_opens(browser: Any, tmp_path: Path) -> None:
    run = make_run(tmp_path, "a", count=6, plugins=[])
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    (run / "records.jsonl").write_text("".join(lines[:2]))
    opened = Opened(browser, view(run))
    page = opened.page
    notes = page.inner_text("#notes")
    assert "4 of 6 prompts have no record yet" in notes and "no events.jsonl" in notes
    assert len(opened.rows()) == 2
    page.click("#prompts tbody tr >> nth=0")
    assert "timeline from the record" in page.inner_text("#timeline")
    opened.clean()
    page.close()


def test_a_run_larger_than_the_table_opens_with_its_charts_counting_every_prompt(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(view_data, "MAX_ROWS", 10)
    monkeypatch.setattr(view_data, "MAX_TIMELINES", 3)
    run = make_run(tmp_path, "big", count=40)
    statuses = [r["status"] for r in records(run)]
    opened = Opened(browser, view(run))
    page = opened.page
    assert len(opened.rows()) == 10
    assert "the table lists 10 of 40 prompts" in page.inner_text("#notes")
    assert "(the table lists 10 of the run's 40" in page.inner_text("#shown")
    bars = page.eval_on_selector_all(
        "#chart-outcomes rect.bar title", "t => t.map(x => x.textContent)"
    )
    assert bars[:2] == [f"ok: {statuses.count('ok')}", f"failed: {statuses.count('failed')}"]
    counts = page.eval_on_selector_all(
        "#chart-tokens rect.bar title", "t => t.map(x => Number(x.textContent.split(': ')[1]))"
    )
    assert sum(counts) == 40  # the histogram counts every prompt, not the 10 listed
    page.click("#prompts tbody tr >> nth=5")
    assert "No timeline embedded" in page.inner_text("#timeline")
    # the page's helpers take arrays far past the size that overflows a spread call
    big = page.evaluate(
        """() => {
        const xs = Array.from({ length: 300000 }, (_, i) => i);
        const body = document.createElement("tbody");
        appendAll(body, xs.map(() => document.createElement("tr")));
        return [maxOf(xs, -1), body.children.length];
    }"""
    )
    assert big == [299999, 300000]
    opened.clean()
    page.close()


def test_pass_at_k_and_pass_hat_k_of_a_rescore_never_stand_bare(
    browser: Any, tmp_path: Path
) -> None:
    # early stop cut the long answers; without max_words a rescore cannot judge them. Three
    # samples a prompt, the replies alternating: two prompts have two known samples, two
    # one (left out of the estimates of k = 2, not of their bounds)
    budgets = {"loop_budget": 1, "concurrency_budget": 3, "early_exit": False}
    settings = {"budgets": budgets, "run": {"max_concurrent_prompts": 1}}
    a = make_run(tmp_path, "a", count=4, requirements=[{"max_words": 5}], **settings)
    config = write_config(
        tmp_path / "r.yaml",
        tmp_path / "a.jsonl",
        backend={"kind": "scripted", "replies": MIXED},
        **settings,
        plugins=["recorder"],
        requirements=[{"contains": "answer"}],
    )
    out = tmp_path / "r"
    with ThreadPoolExecutor(1) as pool:  # a run of its own, beside Playwright's event loop
        pool.submit(rescore_sync, a, out, config=config).result()
    opened = Opened(browser, view(a, out))
    rows = {
        row.locator("td").nth(0).inner_text(): row.locator("td.b").inner_text()
        for row in opened.page.locator("#compare-table tbody tr").all()
    }
    for measure in ("pass@1", "pass^1", "pass@2", "pass^2"):
        assert "not known: " in rows[measure], (measure, rows[measure])
    said = "(bounds over 4 prompts, the estimate over 2: 2 with fewer than 2 known samples)"
    for measure in ("pass@2", "pass^2"):
        assert said in rows[measure], (measure, rows[measure])
    opened.clean()
    opened.page.close()
    # the page of the rescore alone says it beside its pass@k chart
    alone = Opened(browser, view(out))
    note = alone.page.inner_text("#chart-passk .not-known")
    assert note.startswith("over the known samples only: pass@1 ")
    assert "not known: " in note and "pass^2 " in note and said in note
    alone.clean()
    alone.page.close()
