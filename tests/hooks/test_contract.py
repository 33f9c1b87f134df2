"""The hook contract: names, specs, payloads, and the write guard."""

from __future__ import annotations

import copy
import inspect
import pickle
from typing import ClassVar

import pytest

from hook_specs import PAYLOAD_TYPES, HookName, ReadOnlyFieldError, may_write, specs
from hook_specs.payloads import (
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
)
from hook_specs.records import Generation, Usage


def test_every_hook_has_a_spec_with_one_payload_argument_and_a_docstring():
    for hook in HookName.per_call():
        spec = getattr(specs, hook.value)
        assert list(inspect.signature(spec).parameters) == ["payload"]
        assert inspect.getdoc(spec)
        assert spec.samplehooks_spec is not None  # marked as a hookspec
        assert PAYLOAD_TYPES[hook].hook is hook


def test_hook_name_values_are_function_names():
    assert HookName.SAMPLING_ITERATION == "sampling_iteration"
    assert {h.value for h in HookName.per_call()} == {
        "sampling_loop_start",
        "sampling_iteration",
        "sampling_repair",
        "sampling_loop_end",
        "generation_pre_call",
        "generation_post_call",
        "generation_error",
        "generation_chunk",
        "sampling_validate",
        "sampling_call",
        "generation_call",
        "generation_cancelled",
    }
    assert [h for h in HookName if may_write(h)] == [
        HookName.SAMPLING_LOOP_START,
        HookName.SAMPLING_REPAIR,
        HookName.GENERATION_PRE_CALL,
        HookName.SAMPLING_VALIDATE,
    ]


def test_every_payload_field_is_described():
    for model in PAYLOAD_TYPES.values():
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


def _start(**overrides):
    fields = dict(
        sampling_id="s",
        strategy_name="RejectionSampling",
        loop_budget=1,
        concurrency_budget=1,
        messages=[],
        requirements=[],
        selection="first",
        options={},
    )
    fields.update(overrides)
    return SamplingLoopStartPayload(**fields)


def test_writable_fields_accept_anything_and_others_raise_naming_field_and_hook():
    payload = _start()
    payload.loop_budget = "lots"  # validated later by the engine, not here
    assert payload.loop_budget == "lots"
    with pytest.raises(ReadOnlyFieldError) as caught:
        payload.selection = "ordered"
    assert caught.value.field == "selection" and caught.value.hook == "sampling_loop_start"
    assert "loop_budget" in str(caught.value)  # says what may be changed
    with pytest.raises(ReadOnlyFieldError):
        payload.new_field = 1


_ATTEMPT = dict(  # every field given, in order, as the engine gives them
    sampling_id="s", strategy_name="x", prompt_key="p1", subsample_index=0, attempt=1, iteration=1
)


def test_trusted_construction_matches_validated_construction():
    fields = dict(
        **_ATTEMPT,
        text="t",
        validations=[],
        failure_reasons=[],
        next_attempt=2,
        messages=[{"role": "user", "content": "q"}],
    )
    assert SamplingRepairPayload.trusted(**fields) == SamplingRepairPayload(**fields)
    assert SamplingRepairPayload.trusted(**fields).sequence is None


def _post_call_fields():
    return dict(
        **_ATTEMPT,
        sequence=None,
        generation=Generation("an answer", Usage(3, 4)),
        latency_s=0.5,
        retry=0,
        purpose="sample",
    )


def test_a_built_read_only_payload_behaves_as_a_validated_one():
    built = GenerationPostCallPayload.builder()(_post_call_fields())
    validated = GenerationPostCallPayload(**_post_call_fields())
    # Nothing a user can do tells the two apart.
    assert built == validated and repr(built) == repr(validated)
    assert built.model_dump() == validated.model_dump()
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_fields_set == validated.model_fields_set == set(_post_call_fields())
    assert built.model_extra is None
    for twin in (
        copy.copy(built),
        copy.deepcopy(built),
        pickle.loads(pickle.dumps(built)),
        built.model_copy(),
    ):
        assert twin == built
    assert built.model_copy(update={"retry": 2}).retry == 2 and built.retry == 0
    assert built.written_by("retry") is None
    with pytest.raises(ReadOnlyFieldError):
        built.retry = 1


def test_a_validated_payload_keeps_its_own_bookkeeping():
    fields = _post_call_fields()
    del fields["sequence"], fields["retry"]  # left to their defaults
    validated = GenerationPostCallPayload(**fields)
    assert validated.model_fields_set == set(fields)
    assert set(validated.model_dump(exclude_unset=True)) == set(fields)
    built = GenerationPostCallPayload.builder()(_post_call_fields())
    assert built.model_fields_set == set(_post_call_fields())  # not changed by the other


def test_private_state_written_on_one_built_payload_stays_on_it():
    build = GenerationPostCallPayload.builder()
    first, second = build(_post_call_fields()), build(_post_call_fields())
    first.track_writes("some-plugin")
    with pytest.raises(ReadOnlyFieldError):
        first.retry = 3
    assert first.written_by("retry") is None  # a refused write is nobody's
    assert second.written_by("retry") is None


@pytest.mark.parametrize("writable", [False, True])
def test_changing_one_built_payloads_set_of_fields_changes_no_other(writable):
    if writable:
        build, fields = GenerationPreCallPayload.builder(), _pre_call_fields()
    else:
        build, fields = GenerationPostCallPayload.builder(), _post_call_fields()
    first, second = build(dict(fields)), build(dict(fields))
    first.model_fields_set.discard("retry")
    assert "retry" not in first.model_fields_set
    assert "retry" not in first.model_dump(exclude_unset=True)  # the set pydantic reads
    assert second.model_fields_set == set(fields)
    assert second.model_dump(exclude_unset=True).keys() == fields.keys()
    assert build(dict(fields)).model_dump(exclude_unset=True).keys() == fields.keys()


def test_built_payloads_share_one_set_of_fields_set_until_it_is_read():
    # A set copied per payload cost 2 k instructions per payload built: they share the
    # class's until one is read, and the read one gets its own (the test above).
    def fields_set_in_state(payload):
        (found,) = (v for v in payload.__getstate__().values() if isinstance(v, set))
        return found

    build = GenerationPostCallPayload.builder()
    first, second, third = (build(_post_call_fields()) for _ in range(3))
    assert fields_set_in_state(first) is fields_set_in_state(second)
    read = third.model_fields_set
    assert fields_set_in_state(third) is read is not fields_set_in_state(first)
    assert read == fields_set_in_state(first) == set(_post_call_fields())


def test_nothing_is_deleted_from_a_payload():
    build = GenerationPostCallPayload.builder()
    first, second = build(_post_call_fields()), build(_post_call_fields())
    for name in ("generation", "retry", "_writers", "_writer_now"):
        with pytest.raises(AttributeError, match="cannot be deleted"):
            delattr(first, name)
    assert first == second == GenerationPostCallPayload(**_post_call_fields())
    assert second.written_by("retry") is None


def _pre_call_fields():
    return dict(
        **_ATTEMPT,
        sequence=None,
        messages=[{"role": "user", "content": "q"}],
        options={},
        retry=0,
        purpose="sample",
    )


def test_a_built_writable_payload_takes_writes_as_a_validated_one():
    fields = _pre_call_fields()
    build = GenerationPreCallPayload.builder()
    built, other = build(dict(fields)), build(dict(fields))
    validated = GenerationPreCallPayload(**fields)
    assert built == validated
    for payload in (built, validated):
        payload.track_writes("writer")
        payload.options = {"temperature": 0.5}
        assert payload.written_by("options") == "writer"
        assert payload.model_fields_set == set(fields)
    assert built == validated and built.model_dump() == validated.model_dump()
    assert other.options == {} and other.written_by("options") is None
    assert other.model_fields_set == set(fields)


def test_a_subclass_built_by_its_builder_has_its_own_fields_and_private_state():
    class Tagged(GenerationPostCallPayload):
        tag: str = "t"

    built = Tagged.builder()(_post_call_fields())
    assert built.tag == "t" and built.model_fields_set == {*_post_call_fields(), "tag"}
    built.track_writes("me")
    assert Tagged.builder()(_post_call_fields()).written_by("tag") is None

    class Keyed(GenerationPostCallPayload):  # a writable child of a read-only payload
        writable: ClassVar[frozenset[str]] = frozenset({"latency_s"})

    keyed = Keyed.builder()(_post_call_fields())
    keyed.track_writes("writer")
    keyed.latency_s = 1.0
    assert keyed.written_by("latency_s") == "writer"
    assert Keyed.builder()(_post_call_fields()).written_by("latency_s") is None


def test_payloads_serialise_to_json():
    dumped = _start().model_dump(mode="json")
    assert dumped["sampling_id"] == "s" and dumped["loop_budget"] == 1
