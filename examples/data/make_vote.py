"""Write ``vote.jsonl``: 120 small arithmetic questions with their answers, for the
test-time compute benchmark (``python -m benchmarks.votes``).

Deterministic (a fixed seed): ``python examples/data/make_vote.py`` rewrites the same file.
Sums and differences of small numbers: the bundled SmolLM2-135M answers some but not all.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
COUNT = 120


def questions(count: int = COUNT, seed: int = 34) -> list[dict[str, str]]:
    """``count`` questions: ``{"id", "prompt", "answer"}``."""
    rng = random.Random(seed)
    out = []
    seen = set()
    while len(out) < count:
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        op = rng.choice(["plus", "minus"])
        if op == "minus" and b > a:
            a, b = b, a
        if (a, op, b) in seen:
            continue
        seen.add((a, op, b))
        value = a + b if op == "plus" else a - b
        out.append(
            {
                "id": f"q{len(out) + 1:03d}",
                "prompt": f"What is {a} {op} {b}? Reply with the number only.",
                "answer": str(value),
            }
        )
    return out


def main() -> None:
    """Write the dataset next to this script."""
    lines = [json.dumps(q) for q in questions()]
    (HERE / "vote.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
