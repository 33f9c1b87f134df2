"""A Ray address that is open but is not Ray fails fast, and a worker's error is told plainly.

No Ray cluster is needed here: the servers are plain TCP and HTTP servers on 127.0.0.1,
and the retry limit is checked on the driver's own bookkeeping. (The real cluster's
address passing the same probe is in ``runs/test_ray.py``.)
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sampling_core.runs import ConfigError, load_config, run_batch_sync
from sampling_core.runs.config.dataset import PromptItem
from sampling_core.runs.execution import ray_executor
from sampling_core.runs.execution.ray_executor import MAX_TRIES, RayWorkers, _cause, _Chunk
from tests.support.runs_helpers import snapshot, write_config, write_dataset

pytest.importorskip("ray", reason="the `ray` extra is part of the test extra")


@pytest.fixture
def http_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 (as the dashboard's port would be): its address."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A port that accepts connections and never says a word: its address."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def ray_config(tmp_path: Path, address: str) -> Path:
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    return write_config(
        tmp_path / "c.yaml", dataset, run={"executor": "ray", "ray": {"address": address}}
    )


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_http_server_at_the_ray_address_fails_fast_and_writes_nothing(
    tmp_path: Path, http_server: str, scheme: str
) -> None:
    config = ray_config(tmp_path, scheme + http_server)
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError) as caught:
        run_batch_sync(config, tmp_path / "out")
    message = str(caught.value)
    assert f"{scheme}{http_server} is open but is not a Ray cluster" in message
    assert "it answered as an HTTP server: '<!DOCTYPE HTML>'" in message and "8265" in message
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_a_port_that_never_answers_fails_after_the_probe_time(
    tmp_path: Path, silent_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_executor, "_PROBE_S", 0.3)
    with pytest.raises(ConfigError, match=r"is open but is not a Ray cluster \(it sent nothing"):
        run_batch_sync(ray_config(tmp_path, silent_server), tmp_path / "out")
    assert not (tmp_path / "out").exists()


# What a worker's setup error looked like (Ray 2.60): the cause is the last line, behind
# Ray's own traceback and terminal colour codes.
RAY_TEXT = (
    "Failed to deserialize exception. Refer to https://docs.ray.io/...\nOriginal exception:\n"
    'Traceback (most recent call last):\n  File "python/ray/_raylet.pyx", line 2198\n\n'
    "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation "
    "task, \x1b[36mray::PromptWorker.__init__()\x1b[39m (pid=18903, ip=192.0.2.2)\n"
    '  File "sampling_core/runs/execution/ray_worker.py", line 8, in __init__\n'
    "sampling_core.errors.PluginError: plugin 'Bad' failed in generation_pre_call: "
    "@background is only for observe-only hooks\n"
)


def test_a_workers_error_is_its_own_last_line_without_colour_codes() -> None:
    class UnserializableException(Exception):
        pass

    assert _cause(UnserializableException(RAY_TEXT)) == (
        "PluginError: plugin 'Bad' failed in generation_pre_call: "
        "@background is only for observe-only hooks"
    )
    assert _cause(RuntimeError("\x1b[31mplain\x1b[0m\nmore")) == "RuntimeError: plain"


class FakeRay:
    """What ``RayWorkers._lost`` uses of Ray: its exception types, kill, and a new actor."""

    class exceptions:
        class RayActorError(Exception):
            pass

    def __init__(self) -> None:
        self.spawned = 0

    def kill(self, handle: Any, no_restart: bool) -> None:
        pass

    def remote(self, cls: Any) -> Any:
        fake = self

        class Actor:
            def options(self, **_: Any) -> Any:
                return self

            def remote(self, *_: Any) -> Any:
                fake.spawned += 1
                return object()

        return Actor()


class Session:
    number = 1

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    async def finish(self, record: dict[str, Any]) -> None:
        self.records.append(record)


def test_a_prompt_goes_to_at_most_max_tries_workers_then_ends_in_one_error(
    tmp_path: Path,
) -> None:
    config = ray_config(tmp_path, "auto")
    fake = FakeRay()
    handle = object()
    workers = RayWorkers(fake, load_config(config), None, None, [], [handle], False, [0])
    item = PromptItem("p0", 1, "q", (), "sha256:x", {"id": "p0", "prompt": "q"})
    again: deque[tuple[PromptItem, int]] = deque([(item, 0)])
    session = Session()
    sent = 0
    while again:  # the driver's loop: each send's worker dies
        prompt, tries = again.popleft()
        sent += 1
        chunk = _Chunk(0, workers.handles[0], [(prompt, tries)])
        died = fake.exceptions.RayActorError("died")
        anyio.run(workers._lost, chunk, died, again, session)
    assert sent == MAX_TRIES == fake.spawned
    [record] = session.records
    assert record["status"] == "error" and f"died {MAX_TRIES} times" in record["reason"]
