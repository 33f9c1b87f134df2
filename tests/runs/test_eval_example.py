"""``examples/eval.yaml``: its check compares each answer with the dataset line's ``answer``.

The model is replaced by a scripted backend that answers from the prompt (right for some
lines, wrong for others), so what is checked is the eval itself: its dataset, its config
and the row-aware ``equals_field`` check.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sampling_core.backends import ScriptedBackend
from sampling_core.backends.base import GenerationRequest
from sampling_core.runs import run_batch_sync
from sampling_core.runs.config.loading import load_config
from tests.support.runs_helpers import records

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "eval.yaml"
OPERATORS = {"plus": "+", "minus": "-", "times": "*", "divided by": "/"}
QUESTION = re.compile(r"What is (\d+) (plus|minus|times|divided by) (\d+)\?")


def solve(prompt: str) -> int:
    x, op, y = QUESTION.search(prompt).groups()  # type: ignore[union-attr]
    a, b = int(x), int(y)
    return {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[OPERATORS[op]]


def lines() -> list[dict[str, str]]:
    config = load_config(EXAMPLE)
    text = config.dataset.path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_every_line_holds_a_question_and_its_right_answer() -> None:
    dataset = lines()
    assert len(dataset) == 20 and len({line["id"] for line in dataset}) == 20
    for line in dataset:
        assert str(solve(line["prompt"])) == line["answer"], line


def test_the_check_passes_right_answers_and_fails_wrong_ones(tmp_path: Path) -> None:
    wrong = {line["id"] for line in lines()[::3]}  # every third line is answered wrongly
    prompts_of_wrong = {line["prompt"] for line in lines() if line["id"] in wrong}

    def answer(request: GenerationRequest) -> str:
        prompt = request.messages[0]["content"]
        value = solve(prompt) + (1 if any(p in prompt for p in prompts_of_wrong) else 0)
        return f"Let me think: the answer is {value}."  # the last number is what counts

    summary = run_batch_sync(EXAMPLE, tmp_path / "out", backend=ScriptedBackend(answer))
    by_id = {r["key"]: r for r in records(tmp_path / "out")}
    assert len(by_id) == 20
    assert {key for key, r in by_id.items() if r["status"] != "ok"} == wrong
    for key in wrong:  # one attempt each; the reason names the field, never the answer
        assert by_id[key]["attempts"]["used"] == 1
        assert by_id[key]["failed_requirements"] == ["equals field 'answer' (last_number)"]
        expected = next(line["answer"] for line in lines() if line["id"] == key)
        assert f"'{expected}'" not in by_id[key]["reason"]
    assert summary.as_dict()["ok"] == 20 - len(wrong) == 13
