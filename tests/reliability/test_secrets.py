"""A planted API key never shows up: not in logs, spans, recorder files, run directories,
command output or error messages; and prompts and answers stay out unless captured on purpose.

The key is put in the environment variable the OpenAI-compatible backend reads, and the
backend talks to a local scripted HTTP server (``tests/support/_servers/scripted_http.py``) that
checks the key arrived, and answers with errors that echo it back, as real servers do.
Everything the run produced is gathered as text and searched.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

from builtin_plugins.recorder import RecorderPlugin
from builtin_plugins.tracing import TracingPlugin
from sampling_core import Requirement, RetryPolicy, Sampler
from sampling_core.backends import OpenAIBackend
from sampling_core.runs import run_batch_sync
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer, completion
from tests.support.reliability_helpers import invoke, tree
from tests.support.runs_helpers import openai_run_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fresh_secrets")]

KEY = "sk-test-PLANTED-0123456789"
ENV = "SAMPLEHOOKS_TEST_OPENAI_KEY"
PROMPT = "PROMPT-SENTINEL: name a colour"
ANSWER = "ANSWER-SENTINEL blue"
FAST = RetryPolicy(max_retries=2, base_delay=0.0)
colour = Requirement("names a colour", lambda text: "blue" in text)


def echo(status: int) -> Reply:
    """An error that repeats the key, as a careless server (or proxy) might."""
    return Reply(status, {"error": {"message": f"Incorrect API key provided: {KEY}"}})


class Evidence:
    """Everything a run produced, as text, searched for the key and for content."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, *texts: Any) -> None:
        self.parts += [t if isinstance(t, str) else repr(t) for t in texts]

    def add_exception(self, exc: BaseException) -> None:
        self.add(str(exc), repr(exc), "".join(traceback.format_exception(exc)))

    def add_spans(self, exporter: InMemorySpanExporter) -> None:
        for span in exporter.get_finished_spans():
            self.add(span.name, dict(span.attributes or {}), span.status.description or "")
            for event in span.events:
                self.add(event.name, dict(event.attributes or {}))

    def add_files(self, folder: Path) -> None:
        for name, data in tree(folder).items():
            self.add(name, (data or b"").decode("utf-8", "replace"))

    @property
    def text(self) -> str:
        return "\n".join(self.parts)

    def assert_no_secret(self) -> None:
        assert self.parts, "nothing was gathered"
        for needle in ("PLANTED", "Bearer"):
            assert needle not in self.text, f"{needle!r} leaked"

    def assert_no_content(self) -> None:
        for part in self.parts:
            for needle in ("PROMPT-SENTINEL", "ANSWER-SENTINEL"):
                assert needle not in part, part


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setenv("SAMPLEHOOKS_TRACE_HOOKS", "1")  # every hook call printed on stderr
    configured = structlog.is_configured()
    yield KEY
    if not configured:  # capture_logs() leaves structlog marked as configured
        structlog.reset_defaults()


def assert_key_sent(server: ScriptedHTTPServer) -> None:
    """The key was really in use: every request carried it."""
    assert server.arrivals
    assert all(a.headers.get("authorization") == f"Bearer {KEY}" for a in server.arrivals)


async def sample_through(
    server: ScriptedHTTPServer,
    tmp_path: Path,
    provider: TracerProvider,
    *,
    capture: bool = False,
    loop_budget: int = 3,
) -> tuple[Any, BaseException | None, list[dict[str, Any]]]:
    recorder = RecorderPlugin(tmp_path / "events.jsonl", capture_content=capture)
    tracing = TracingPlugin(capture_content=capture, tracer_provider=provider)
    result, raised = None, None
    with capture_logs() as logs:
        async with OpenAIBackend("m", base_url=server.base_url, api_key_env=ENV) as backend:
            sampler = Sampler(
                backend, plugins=[tracing, recorder], load_entrypoints=False, retry=FAST
            )
            try:
                result = await sampler.sample(
                    PROMPT, requirements=[colour], loop_budget=loop_budget
                )
            except Exception as exc:
                raised = exc
            finally:
                recorder.close()
                logs.append({"backend": repr(backend)})
    return result, raised, logs


@pytest.mark.anyio
async def test_success_after_a_500_and_a_repair_leaks_no_key_and_no_content(
    key: str, tmp_path: Path, provider: TracerProvider, exporter, capsys
) -> None:
    script = [echo(500), Reply(body=completion("grey")), Reply(body=completion(ANSWER))]
    with ScriptedHTTPServer(lambda n, body: script[min(n, 3) - 1]) as server:
        result, raised, logs = await sample_through(server, tmp_path, provider)
    assert raised is None and result.success and result.iterations_used == 2
    assert_key_sent(server)
    out, err = capsys.readouterr()
    assert "samplehooks: generation_error -> TracingPlugin" in err  # hook tracing was on
    evidence = Evidence()
    evidence.add(out, err, logs, [str(e) for e in result.errors])
    assert "PLANTED" not in repr(result)
    evidence.add_spans(exporter)
    evidence.add_files(tmp_path)
    assert any(log.get("event") == "generation.error" for log in logs)
    evidence.assert_no_secret()
    evidence.assert_no_content()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "reply",
    [
        echo(401),  # refused key, echoed back
        echo(500),  # server errors until the retries are spent
        Reply(200, {"object": "not a completion", "echo": KEY}),  # a reply we cannot read
    ],
    ids=["401", "500", "garbage"],
)
async def test_error_paths_leak_no_key(
    reply: Reply, key: str, tmp_path: Path, provider: TracerProvider, exporter, capsys
) -> None:
    with ScriptedHTTPServer(lambda n, body: reply) as server:
        result, raised, logs = await sample_through(server, tmp_path, provider, loop_budget=1)
    assert result is None and raised is not None
    assert_key_sent(server)
    assert "***" in str(raised)  # the echoed key was there, and was scrubbed
    evidence = Evidence()
    evidence.add(*capsys.readouterr(), logs)
    evidence.add_exception(raised)
    evidence.add_spans(exporter)
    evidence.add_files(tmp_path)
    evidence.assert_no_secret()
    evidence.assert_no_content()


@pytest.mark.anyio
async def test_content_is_captured_only_when_asked_and_the_key_still_is_not(
    key: str, tmp_path: Path, provider: TracerProvider, exporter, capsys
) -> None:
    with ScriptedHTTPServer(lambda n, body: Reply(body=completion(ANSWER))) as server:
        result, _, logs = await sample_through(server, tmp_path, provider, capture=True)
    assert result.success
    evidence = Evidence()
    evidence.add(*capsys.readouterr(), logs)
    evidence.add_spans(exporter)
    evidence.add_files(tmp_path)
    for where in (repr(logs), (tmp_path / "events.jsonl").read_text()):
        assert "PROMPT-SENTINEL" in where and "ANSWER-SENTINEL" in where
    evidence.assert_no_secret()


def batch_config(tmp_path: Path, server: ScriptedHTTPServer, **backend: Any) -> Path:
    return openai_run_config(
        tmp_path,
        [f"{PROMPT} {i}" for i in range(4)],
        api_key_env=ENV,
        backend={"base_url": server.base_url, **backend},
        requirements=[{"contains": "blue"}],
        run={"max_concurrent_prompts": 2},
    )


def answer_or_refuse(number: int, body: Any) -> Reply:
    """Prompt 1 is refused with the key echoed; the others get an answer."""
    prompt = body["messages"][-1]["content"]
    return echo(401) if prompt.endswith(" 1") else Reply(body=completion(ANSWER))


def test_a_batch_run_leaks_no_key_into_its_directory_or_output(
    key: str, tmp_path: Path, provider: TracerProvider, exporter, capsys
) -> None:
    with ScriptedHTTPServer(answer_or_refuse) as server:
        config = batch_config(tmp_path, server)
        out = tmp_path / "out"
        with capture_logs() as logs:
            summary = run_batch_sync(config, out, plugins=[TracingPlugin(tracer_provider=provider)])
        assert (summary.ok, summary.error) == (3, 1)
        assert_key_sent(server)
        by_cli = invoke("run", config, "--out", tmp_path / "out-cli", env={ENV: KEY})
        assert by_cli.exit_code == 0, by_cli.output
    records = (out / "records.jsonl").read_text()
    assert "***" in records  # the refusal's echoed key was scrubbed, not lost
    evidence = Evidence()
    evidence.add(*capsys.readouterr(), logs, by_cli.stdout, by_cli.stderr)
    for args in (["report", out], ["trace", "show", out / "events.jsonl"]):
        shown = invoke(*args)
        assert shown.exit_code == 0, shown.output
        evidence.add(shown.stdout, shown.stderr)
    evidence.add_spans(exporter)
    for run in (out, tmp_path / "out-cli"):
        assert f"api_key_env: {ENV}" in (run / "effective_config.yaml").read_text()
        for answers in ("records.jsonl", "texts.jsonl"):  # the answers, kept on purpose
            (run / answers).rename(tmp_path / f"{run.name}.{answers}")
        evidence.add_files(run)
    evidence.assert_no_content()  # logs, spans, events, config, progress, output
    evidence.add_files(tmp_path)  # and the records and the dataset too, for the key
    evidence.assert_no_secret()


def test_a_key_put_where_it_does_not_belong_is_refused_without_repeating_it(
    key: str, tmp_path: Path
) -> None:
    with ScriptedHTTPServer(answer_or_refuse) as server:
        good = batch_config(tmp_path, server)
        assert invoke("run", good, "--out", tmp_path / "out").exit_code == 0
        run_before = tree(tmp_path / "out")
        mistakes = [
            batch_config(tmp_path / "a", server, api_key_env=KEY),
            batch_config(tmp_path / "b", server, base_url=f"http://user:{KEY}@127.0.0.1:1/v1"),
            batch_config(tmp_path / "c", server, api_key=KEY),
            batch_config(tmp_path / "d", server, timeout_s=KEY),
            batch_config(tmp_path / "e", server, model=KEY),  # valid, but a secret
        ]
    evidence = Evidence()
    for config in mistakes:
        for args in (["--out", tmp_path / "new"], ["--out", tmp_path / "out", "--resume"]):
            result = invoke("run", config, *args)
            assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
            evidence.add(result.stdout, result.stderr)
    sample = invoke("sample", PROMPT, "--backend", "openai", "--model", "m", "--api-key-env", KEY)
    assert sample.exit_code == 2
    evidence.add(sample.stdout, sample.stderr)
    assert not (tmp_path / "new").exists() and tree(tmp_path / "out") == run_before
    evidence.assert_no_secret()


def test_samplehooks_sample_against_a_refusing_server_leaks_no_key(key: str) -> None:
    with ScriptedHTTPServer(lambda n, body: echo(401)) as server:
        result = invoke(
            "sample", PROMPT,
            "--backend", "openai", "--model", "m", "--base-url", server.base_url,
            "--api-key-env", ENV, "--plugin", "tracing", "--loop-budget", "2",
        )  # fmt: skip
        assert_key_sent(server)
    assert result.exit_code == 1 and "401" in result.stderr and "***" in result.stderr
    evidence = Evidence()
    evidence.add(result.stdout, result.stderr)
    evidence.assert_no_secret()
    evidence.assert_no_content()
