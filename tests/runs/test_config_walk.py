"""The one walk of the config tree (``walk_config``), and the two rules built on it."""

from __future__ import annotations

from pydantic import BaseModel

from sampling_core.runs.config.classification import classified_fields, walk_config
from sampling_core.runs.config.config import RunConfig, _field
from sampling_core.runs.resume.integrity import result_settings
from sampling_core.runs.resume.resume import Difference, compare_configs


class Inner(BaseModel):
    speed: int = _field("throughput", 1, description="x")
    answer: int = _field("result", 2, description="x")


class Outer(BaseModel):
    name: str = _field("result", "a", description="x")
    inner: Inner | None = _field("result", None, description="x")
    items: list[Inner] = _field("result", [], description="x")
    where: str = _field("location", "here", description="x")


def test_the_model_alone_is_walked_into_every_nested_model_blocks_first() -> None:
    walked = [(f.path, f.label, f.descends) for f in walk_config(Outer)]
    assert walked == [
        ("name", "result", False),
        ("inner", "result", True),
        ("inner.speed", "throughput", False),
        ("inner.answer", "result", False),
        ("items", "result", True),
        ("items[].speed", "throughput", False),
        ("items[].answer", "result", False),
        ("where", "location", False),
    ]
    assert all(f.values == () for f in walk_config(Outer))
    assert [f.path for f in classified_fields(RunConfig)] == [
        f.path for f in walk_config(RunConfig)
    ]


def test_configs_walked_side_by_side_carry_each_value_and_enter_blocks_all_hold() -> None:
    old = Outer(inner=Inner(speed=3), items=[Inner()])
    new = Outer(name="b", inner=Inner(answer=5), items=[])
    walked = [(f.path, f.values, f.descends) for f in walk_config(Outer, (old, new))]
    assert walked == [
        ("name", ("a", "b"), False),
        ("inner", (Inner(speed=3), Inner(answer=5)), True),
        ("inner.speed", (3, 1), False),
        ("inner.answer", (2, 5), False),
        ("items", ([Inner()], []), False),  # a list of models is a value
        ("where", ("here", "here"), False),
    ]
    # a block one config leaves out is a value too: the walk does not enter it
    absent = [(f.path, f.descends) for f in walk_config(Outer, (Outer(), new))][:3]
    assert absent == [("name", False), ("inner", False), ("items", False)]


def base(**changes: object) -> RunConfig:
    data: dict[str, object] = {
        "dataset": {"path": "p.jsonl"},
        "backend": {"kind": "scripted", "replies": ["a"]},
    }
    data.update(changes)
    return RunConfig.model_validate(data)


def test_resume_compares_a_blocks_options_after_its_fields_and_before_the_next_block() -> None:
    old = base()
    new = base(
        backend={"kind": "scripted", "replies": ["b"], "retries": {"max_retries": 5}},
        strategy={"name": "rejection", "extra_option": 1},
        seed=3,
        dataset={"path": "moved.jsonl"},  # a location: never compared
    )
    assert compare_configs(old, new) == [
        Difference("backend.retries.max_retries", "result", 3, 5),
        Difference("backend.replies", "result", ["a"], ["b"]),
        Difference("strategy.extra_option", "result", None, 1),
        Difference("seed", "result", None, 3),
    ]


def test_the_result_settings_are_the_result_leaves_of_the_same_walk() -> None:
    config = base(seed=7)
    settings = result_settings(config)
    leaves = {
        f.path for f in walk_config(RunConfig, (config,)) if not f.descends and f.label == "result"
    }
    expected = {
        "dataset.prompt_field",
        "dataset.id_field",
        "dataset.requirements_field",
        "backend.kind",
        "backend.retries.max_retries",
        "backend.retries.base_delay_s",
        "backend.retries.max_delay_s",
        "backend.replies",  # an option of the scripted kind, beside `kind`
        "options.temperature",
        "options.top_p",
        "options.logprobs",
        "options.top_logprobs",
        "options.max_tokens",
        "options.stop",
        "strategy.name",
        "budgets.loop_budget",
        "budgets.concurrency_budget",
        "budgets.early_exit",
        "budgets.early_stop",
        "budgets.launch",
        "budgets.stagger_s",
        "requirements",
        "seed",
        "format",
        "selection",
        "check_timeout_s",
        "attempt_timeout_s",
    }
    assert set(settings) == expected
    # the walk's leaves, less the plugins (none configured: each plugin is its own setting)
    assert leaves == expected - {"backend.replies"} | {"plugins"}
    assert settings["seed"] == 7
    assert settings["backend.retries.max_retries"] == 3
    assert "dataset.path" not in settings  # a location
    assert "run.max_concurrent_prompts" not in settings  # throughput
