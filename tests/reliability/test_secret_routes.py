"""Secrets by every route: pieces of a key, a key cut by truncation, credentials in the base
URL from the environment, a server echoing the key in a *successful* reply, explicit auth
headers, and redirects (never followed, always an error)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builtin_plugins.recorder import RecorderPlugin
from sampling_core import RetryPolicy, Sampler
from sampling_core.backends import OpenAIBackend
from sampling_core.backends.openai_compat import BackendError
from sampling_core.redaction import MIN_PIECE, register_secret, scrub, scrub_data
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer, completion
from tests.support.reliability_helpers import invoke, tree
from tests.support.runs_helpers import openai_run_config

pytestmark = pytest.mark.usefixtures("fresh_secrets")
KEY = "sk-route-SECRETKEY-9876543210abcdef"
ENV = "SAMPLEHOOKS_TEST_ROUTE_KEY"
FAST = RetryPolicy(max_retries=0, base_delay=0.0)


def pieces(secret: str) -> list[str]:
    return [secret[i : i + MIN_PIECE] for i in range(len(secret) - MIN_PIECE + 1)]


def assert_clean(text: str, *secrets: str) -> None:
    for secret in secrets:
        leaked = [p for p in pieces(secret) if p in text] if len(secret) >= MIN_PIECE else []
        assert not leaked and secret not in text, (leaked, text[:500])


def test_any_long_piece_of_a_registered_secret_is_masked() -> None:
    register_secret(KEY)
    for start, end in [(0, 8), (3, 20), (10, len(KEY)), (len(KEY) - 8, len(KEY))]:
        shown = scrub(f"before {KEY[start:end]} after")
        assert shown.startswith("before ") and shown.endswith(" after") and "***" in shown
        assert_clean(shown, KEY)
    assert scrub(f"x{KEY[:7]}y") == f"x{KEY[:7]}y"  # 7 characters say nothing
    nested = scrub_data({"a": [f"Bearer {KEY}", {KEY: 1}], "n": 3})
    assert_clean(json.dumps(nested), KEY) and nested["n"] == 3


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(ENV, KEY)
    return KEY


@pytest.mark.anyio
@pytest.mark.parametrize("cut", [250, 290, 295, 299, 150, 185, 195, 199])
async def test_a_key_straddling_the_cut_of_an_error_message_is_masked_whole(
    key: str, cut: int
) -> None:
    padding = "x" * cut  # the key starts just before the message is cut short
    replies = [
        Reply(401, {"error": {"message": padding + KEY}}),
        Reply(200, {"not": "a completion", "echo": "y" * (cut - 70) + KEY}),
        Reply(500, padding + KEY),
    ]
    for reply in replies:
        with ScriptedHTTPServer(lambda n, body, r=reply: r) as server:
            async with OpenAIBackend("m", base_url=server.base_url, api_key_env=ENV) as backend:
                sampler = Sampler(backend, load_entrypoints=False, retry=FAST)
                with pytest.raises(Exception) as raised:
                    await sampler.sample("hi")
        assert_clean(str(raised.value), KEY)


def run_config(tmp_path: Path, **backend: Any) -> Path:
    return openai_run_config(
        tmp_path, [f"q {i}" for i in range(3)], api_key_env=ENV, backend=backend
    )


def everything(folder: Path, *outputs: Any) -> str:
    files = [(data or b"").decode("utf-8", "replace") for data in tree(folder).values()]
    return "\n".join([*files, *(str(o) for o in outputs)])


def test_credentials_in_the_base_url_from_the_environment_are_never_shown_or_stored(
    key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, password, token = "routeuser", "PASSWORD-route-4242", "QUERYTOKEN-route-77"
    with ScriptedHTTPServer(lambda n, body: Reply(body=completion("ok"))) as server:
        host = server.base_url.split("://", 1)[1]
        url = f"http://{user}:{password}@{host}?api_key={token}"
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        config = run_config(tmp_path)  # no base_url: the server comes from the environment
        result = invoke("run", config, "--out", tmp_path / "out")
        assert result.exit_code == 0, result.output
        report = invoke("report", tmp_path / "out")
        sample = invoke("sample", "hi", "--backend", "openai", "--model", "m", "--api-key-env", ENV)
        failing = invoke(
            "sample", "hi", "--backend", "openai", "--model", "m", "--api-key-env", ENV,
            "--base-url", f"http://{user}:{password}@127.0.0.1:9/v1?token={token}",
        )  # fmt: skip
    assert server.arrivals and sample.exit_code == 0 and failing.exit_code != 0
    assert (
        "127.0.0.1"
        in (tmp_path / "out" / "effective_config.yaml").read_text()
        + (tmp_path / "out" / "meta.json").read_text()
    )  # the server used is recorded, without its credentials
    assert repr(OpenAIBackend("m", api_key_env=ENV)).count(password) == 0
    text = everything(tmp_path, result.stdout, result.stderr, report.stdout, sample.stdout)
    text += failing.stdout + failing.stderr
    assert_clean(text, KEY, password, token)


def echo_everything(number: int, body: Any) -> Reply:
    """A successful reply that repeats the key (in the text and elsewhere in the body)."""
    reply = completion(f"blue; you sent Authorization: Bearer {KEY}")
    reply["echo"] = {"authorization": f"Bearer {KEY}", "part": KEY[5:20]}
    return Reply(body=reply)


@pytest.mark.anyio
async def test_a_successful_reply_echoing_the_key_is_scrubbed_in_the_result_and_events(
    key: str, tmp_path: Path
) -> None:
    recorder = RecorderPlugin(tmp_path / "events.jsonl", capture_content=True)
    with ScriptedHTTPServer(echo_everything) as server:
        async with OpenAIBackend("m", base_url=server.base_url, api_key_env=ENV) as backend:
            sampler = Sampler(backend, plugins=[recorder], load_entrypoints=False)
            result = await sampler.sample("hi")
        recorder.close()
    assert result.text.startswith("blue") and "***" in result.text
    raw = json.dumps(result.attempts[0].generation.raw)
    assert "***" in raw
    assert_clean("\n".join([result.text, raw, repr(result), everything(tmp_path)]), KEY)


def test_a_successful_reply_echoing_the_key_is_scrubbed_in_runs_and_command_output(
    key: str, tmp_path: Path
) -> None:
    with ScriptedHTTPServer(echo_everything) as server:
        config = run_config(tmp_path, base_url=server.base_url)
        ran = invoke("run", config, "--out", tmp_path / "out")
        report = invoke("report", tmp_path / "out")
        trace = invoke("trace", "show", tmp_path / "out" / "events.jsonl")
        shown = invoke(
            "sample", "hi", "--backend", "openai", "--model", "m", "--base-url", server.base_url,
            "--api-key-env", ENV,
        )  # fmt: skip
    assert ran.exit_code == 0 and shown.exit_code == 0, (ran.output, shown.output)
    assert "***" in shown.stdout and "***" in (tmp_path / "out" / "records.jsonl").read_text()
    outputs = [r.stdout + r.stderr for r in (ran, report, trace, shown)]
    assert_clean(everything(tmp_path, *outputs), KEY)


@pytest.mark.anyio
@pytest.mark.parametrize("header", ["Authorization", "api-key", "X-API-Key"])
async def test_explicit_auth_headers_are_secrets_too(header: str) -> None:
    token = f"hdr-{header}-0123456789-secret"
    value = f"Bearer {token}" if header == "Authorization" else token

    def echo(number: int, body: Any) -> Reply:
        return Reply(401, {"error": {"message": f"bad {header}: {value}"}})

    with ScriptedHTTPServer(echo) as server:
        backend = OpenAIBackend(
            "m", base_url=server.base_url, api_key_env=None, headers={header: value}
        )
        async with backend:
            with pytest.raises(BackendError) as raised:
                await Sampler(backend, load_entrypoints=False, retry=FAST).sample("hi")
    assert server.arrivals[0].headers.get(header.lower()) == value
    assert "***" in str(raised.value)
    assert_clean(str(raised.value), token)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308, 300, 304])
async def test_a_redirect_is_an_error_and_is_never_followed(key: str, status: int) -> None:
    def redirect(number: int, body: Any) -> Reply:
        return Reply(status, completion("looks fine"), headers={"Location": "http://127.0.0.1:9/x"})

    with ScriptedHTTPServer(redirect) as server:
        async with OpenAIBackend("m", base_url=server.base_url, api_key_env=ENV) as backend:
            with pytest.raises(BackendError, match=f"answered {status}.*redirect") as raised:
                await Sampler(backend, load_entrypoints=False, retry=FAST).sample("hi")
    assert raised.value.status == status and len(server.arrivals) == 1
