"""A token given in an explicit header (``Authorization``, ``api-key``, ``X-Api-Key``) never
shows up in an error, whether the server echoes it back or the HTTP client refuses to send it.

The environment-variable key is covered by ``reliability/test_secrets.py``; here no key
variable is used, so only the header's token can leak.
"""

from __future__ import annotations

import traceback

import pytest

from sampling_core import RetryPolicy, Sampler
from sampling_core.backends import OpenAIBackend
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.usefixtures("fresh_secrets")]

TOKEN = "tok-PLANTED-0123456789"
HEADERS = [
    ("Authorization", f"Bearer {TOKEN}"),
    ("api-key", TOKEN),  # Azure OpenAI's header
    ("X-Api-Key", TOKEN),
]
NO_RETRY = RetryPolicy(max_retries=0, base_delay=0.0)


async def failure_of(server: ScriptedHTTPServer, header: str, value: str) -> Exception:
    """What ``sample()`` raised, with the token given only in ``header``."""
    backend = OpenAIBackend(
        "m", base_url=server.base_url, api_key_env=None, headers={header: value}
    )
    async with backend:
        sampler = Sampler(backend, load_entrypoints=False, retry=NO_RETRY)
        with pytest.raises(Exception) as raised:
            await sampler.sample("q")
    return raised.value


def assert_scrubbed(exc: Exception, *fragments: str) -> None:
    text = "".join(traceback.format_exception(exc)) + repr(exc)
    assert "PLANTED" not in text, text
    assert "***" in str(exc), str(exc)  # the token was in the message, and was replaced
    for fragment in fragments:
        assert fragment in str(exc), str(exc)


@pytest.mark.parametrize(("header", "value"), HEADERS, ids=[h for h, _ in HEADERS])
@pytest.mark.parametrize(
    "reply",
    [
        Reply(401, {"error": {"message": f"Incorrect API key provided: {TOKEN}"}}),
        Reply(500, {"error": {"message": f"upstream refused {TOKEN}"}}),
        Reply(200, {"object": "not a completion", "echo": TOKEN}),
    ],
    ids=["401", "500", "garbage"],
)
async def test_a_header_token_echoed_by_the_server_is_scrubbed(
    header: str, value: str, reply: Reply, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedHTTPServer(lambda n, body: reply) as server:
        exc = await failure_of(server, header, value)
    assert server.arrivals[0].headers[header.lower()] == value  # the token really was sent
    where = "answered" if reply.status >= 400 else "not a completion"
    assert_scrubbed(exc, where)


async def test_a_transport_error_that_quotes_the_header_is_scrubbed() -> None:
    # A token read from a file with its newline: the HTTP client refuses the header and its
    # error message quotes the header's value. No request reaches the server.
    with ScriptedHTTPServer(lambda n, body: Reply()) as server:
        exc = await failure_of(server, "Authorization", f"Bearer {TOKEN}\n")
    assert server.arrivals == []
    assert_scrubbed(exc, "LocalProtocolError", "Illegal header value")
