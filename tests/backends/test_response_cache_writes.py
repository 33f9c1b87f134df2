"""The response cache never costs an answer: a failed write is a warning, and a retry asks."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from sampling_core import Sampler, ScriptedBackend
from sampling_core.backends.cache_store import ResponseCache
from sampling_core.requirements import max_words
from sampling_core.runs import run_batch
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def written_warnings(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "cache.write_failed"]


async def test_a_full_disk_is_a_warning_and_the_answer_stands(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
    cache._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk full"
    backend = ScriptedBackend(["an answer " * 2000])
    with capture_logs() as logs:
        async with Sampler(backend, cache=cache, load_entrypoints=False) as sampler:
            result = await sampler.sample("q", seed=1)
    assert result.text == "an answer " * 2000 and not result.errors
    (warning,) = written_warnings(logs)
    assert warning["log_level"] == "warning" and "full" in warning["error"]
    assert warning["path"] == str(cache.path)
    cache.close()


async def test_an_answer_too_large_for_the_file_is_a_warning_and_stands(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache._db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 4000)  # a row SQLite cannot hold
    backend = ScriptedBackend(["x" * 5000, "one two three four five"])
    with capture_logs() as logs:
        async with Sampler(backend, cache=cache, load_entrypoints=False) as sampler:
            whole = await sampler.sample("q", seed=1)
            # a cut answer's write fails alike
            cut = await sampler.sample("q", requirements=[max_words(1)], seed=2)
    assert whole.text == "x" * 5000 and cut.attempts[0].stopped_early
    assert len(written_warnings(logs)) == 1  # the cut one was short enough
    assert len(cache) == 1
    cache.close()


def test_a_file_past_the_size_the_system_allows_is_a_warning_and_the_answer_stands(
    tmp_path: Path,
) -> None:
    """An I/O error from the operating system (here: the file size limit, ``EFBIG``) while
    the answer is written: the call returns its answer all the same."""
    script = textwrap.dedent(
        f"""
        import json, resource, signal, sys
        import anyio
        from structlog.testing import capture_logs
        from sampling_core import Sampler, ScriptedBackend

        async def main():
            path = {str(tmp_path / "c.sqlite")!r}
            sampler = Sampler(ScriptedBackend(["y" * 300_000]), cache=path)
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails
            resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
            with capture_logs() as logs:
                result = await sampler.sample("q", seed=1)
            await sampler.aclose()
            failed = [e for e in logs if e["event"] == "cache.write_failed"]
            print(json.dumps({{"length": len(result.text), "warnings": failed}}))

        anyio.run(main)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["length"] == 300_000
    (warning,) = seen["warnings"]
    assert warning["error_type"] == "CacheError"


async def test_retry_failed_asks_again_and_its_answers_replace_the_stored_ones(
    tmp_path: Path,
) -> None:
    # unseeded: a retry sends the very requests the first sampling sent (with a seed it
    # sends its own: tests/seams/test_retry_seeds.py)
    asked: list[str] = []

    def answer(request: Any) -> str:  # a worse answer the first time a prompt is asked
        asked.append(request.prompt)
        return "too many words here" if asked.count(request.prompt) == 1 else "fine"

    config = write_config(
        tmp_path / "c.yaml",
        write_dataset(tmp_path / "d.jsonl", 3),
        requirements=[{"max_words": 2}],
        run={"cache": "responses.sqlite"},
        seed=None,
    )
    out = tmp_path / "run"
    first = await run_batch(config, out, backend=ScriptedBackend(answer))
    assert (first.ok, len(asked)) == (0, 3)
    again = await run_batch(
        config, out, resume=True, retry_failed=True, backend=ScriptedBackend(answer)
    )
    assert len(asked) == 6  # each failed prompt was asked again, not answered from the cache
    assert again.ok == 3
    retried = [r for r in records(out) if r["session"] == 2]
    assert all(not e.get("cached") for r in retried for e in r["attempts"]["each"])
    # a later run with the same cache gets the answers the retry got
    later = await run_batch(config, tmp_path / "later", backend=ScriptedBackend(answer))
    assert (later.ok, later.cached_calls, len(asked)) == (3, 3, 6)
