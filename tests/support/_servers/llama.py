"""llama.cpp's HTTP server on the embedded model, for the real-backend tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from sampling_core.backends.local import LlamaServer

SLOTS = 4


def running_llama_server() -> Iterator[LlamaServer]:
    """Start llama.cpp's server (SmolLM2-135M-Instruct, 4 slots) and stop it afterwards."""
    server = LlamaServer(parallel=SLOTS, context_per_slot=512)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def metrics(base_url: str) -> dict[str, float]:
    """The server's Prometheus counters, by name without the ``llamacpp:`` prefix."""
    text = httpx.get(f"{base_url}/metrics", timeout=30).text
    values = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:"):
            name, _, value = line.partition(" ")
            values[name.removeprefix("llamacpp:")] = float(value)
    return values


def busy_slots_per_decode(before: dict[str, float], after: dict[str, float]) -> float:
    """How many slots each decode step served on average between two readings."""

    def busy(m: dict[str, float]) -> float:
        return m["n_busy_slots_per_decode"] * m["n_decode_total"]

    decodes = after["n_decode_total"] - before["n_decode_total"]
    return (busy(after) - busy(before)) / decodes
