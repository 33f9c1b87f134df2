"""The secret scrubbing itself (``sampling_core.redaction``), unit by unit and exactly:
what is registered, which pieces are masked, what the environment and URLs give, and the
scrubbed logger and stream. The routes secrets take out of the engine are tested in
``test_reliability_secret*.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from sampling_core.redaction import (
    ScrubbedLogger,
    ScrubbedStream,
    clean_text,
    environment_secrets,
    has_secrets,
    one_json_line,
    refresh_environment,
    register_headers,
    register_secret,
    scrub,
    scrub_data,
    url_secrets,
    without_credentials,
)

pytestmark = pytest.mark.usefixtures("fresh_secrets")

NINE = "Q1w2E3r4T"  # 9 characters: two 8-character pieces


def test_a_registered_secret_is_masked_whole_and_by_every_8_character_piece() -> None:
    register_secret("")
    register_secret(None)
    assert not has_secrets()
    register_secret(NINE)
    assert has_secrets()
    assert scrub(f"key={NINE};") == "key=***;"
    assert scrub(f"head {NINE[:8]}") == "head ***"  # the first piece
    assert scrub(f"tail {NINE[1:]}") == "tail ***"  # the last piece, at the very end
    assert scrub(NINE[1:]) == "***"  # a text that is exactly one piece
    assert scrub(f"{NINE[2:]} and {NINE[:7]}") == f"{NINE[2:]} and {NINE[:7]}"  # 7 say nothing
    register_secret(NINE)  # twice is once
    assert scrub(NINE) == "***"


def test_environment_secrets_are_matched_whole_longest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAMPLEHOOKS_T_API_TOKEN", "secret-9876")
    monkeypatch.setenv("SAMPLEHOOKS_T_Password", "A-secret-9876-B")
    monkeypatch.setenv("SAMPLEHOOKS_T_SHORT_KEY", "1234567")  # under 8 characters
    monkeypatch.setenv("SAMPLEHOOKS_T_EIGHT_KEY", "12345678")
    monkeypatch.setenv("SAMPLEHOOKS_T_PLAIN", "not-a-secret-at-all")
    found = environment_secrets()
    assert {"secret-9876", "A-secret-9876-B", "12345678"} <= found
    assert "1234567" not in found and "not-a-secret-at-all" not in found
    refresh_environment()
    assert has_secrets()
    assert scrub("A-secret-9876-B / secret-9876") == "*** / ***"
    assert scrub("secret-987 not-a-secret-at-all") == "secret-987 not-a-secret-at-all"


def test_the_credentials_of_authentication_headers_are_registered() -> None:
    register_headers(
        [
            ("AUTHORIZATION", "Bearer abc123"),  # a short token is still matched whole
            ("api-key", "two words"),
            ("X-Api-Key", "   "),
            ("X-Request-Id", "request-id-0123456789"),
        ]
    )
    assert scrub("sent abc123") == "sent ***"
    assert scrub("two words") == "***"
    assert scrub("request-id-0123456789") == "request-id-0123456789"


def test_url_credentials_and_what_is_safe_to_show() -> None:
    url = "https://me:pw@example.com:8443/v1?api_key=K1&x=1&Token=T2&sig=&code=C3#frag"
    assert url_secrets(url) == ["me", "pw", "K1", "T2", "C3"]
    assert url_secrets("https://example.com/v1?model=m") == []
    assert url_secrets("http://[::1") == []
    assert without_credentials(url) == "https://example.com:8443/v1"
    assert without_credentials("http://u:p@[::1]:8080/v1?key=k") == "http://[::1]:8080/v1"
    assert without_credentials("https://example.com/v1") == "https://example.com/v1"
    assert without_credentials("file:///tmp/x") == "file:///tmp/x"
    assert without_credentials("http://[::1") == "***"


def test_unencodable_text_and_data_are_cleaned() -> None:
    assert clean_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert clean_text("plain é") == "plain é"
    register_secret(NINE)
    data = {1: "one", "k": (f"x {NINE}", {"n": None}), NINE: 2.5}
    assert scrub_data(data) == {1: "one", "k": ["x ***", {"n": None}], "***": 2.5}


def test_one_json_line_is_one_readable_line() -> None:
    line = one_json_line({"a": "é\u2028\u2029\x85", "b": [1, 2]})
    assert line == '{"a":"é\\u2028\\u2029\\u0085","b":[1,2]}\n'
    assert one_json_line({"p": Path("x")}, default=str) == '{"p":"x"}\n'
    assert one_json_line("plain") == '"plain"\n'


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error"])
def test_the_scrubbed_logger_scrubs_fields_at_every_level(level: str) -> None:
    register_secret(NINE)
    logger = ScrubbedLogger(structlog.get_logger("test"))
    with capture_logs() as logs:
        getattr(logger, level)("an.event", detail=f"key {NINE}", n=3)
    assert logs == [{"event": "an.event", "detail": "key ***", "n": 3, "log_level": level}]


class Sink:
    def __init__(self, encoding: str | None) -> None:
        self.encoding = encoding
        self.buffer = object()
        self.written: list[object] = []

    def write(self, text: object) -> int:
        self.written.append(text)
        return 1


class NoEncodingSink:
    def __init__(self) -> None:
        self.written: list[object] = []

    def write(self, text: object) -> int:
        self.written.append(text)
        return 1


def test_the_scrubbed_stream_scrubs_and_never_fails_to_encode() -> None:
    register_secret(NINE)
    ascii_sink = Sink("ascii")
    stream = ScrubbedStream(ascii_sink)
    assert stream.write(f"é {NINE}\n") == len("? ***\n")
    assert stream.write(b"raw") == 1  # bytes go through as the stream takes them
    assert ascii_sink.written == ["? ***\n", b"raw"]
    for sink in (Sink(None), NoEncodingSink()):
        ScrubbedStream(sink).write("é \ud800")
        assert sink.written == ["é \ufffd"]
    with pytest.raises(AttributeError) as raised:
        stream.buffer  # noqa: B018
    assert str(raised.value) == "buffer"
    assert stream.encoding == "ascii"
