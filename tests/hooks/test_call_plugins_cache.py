"""Per-call plugins: their table is reused for the same objects, and never goes stale."""

from __future__ import annotations

import pytest

from hook_specs import hookimpl
from sampling_core import Sampler, ScriptedBackend
from sampling_core.hooks.table import CallTables
from sampling_core.testing import HookRecorder

pytestmark = pytest.mark.anyio


def sampler(*plugins) -> Sampler:
    return Sampler(ScriptedBackend(["x"]), plugins=list(plugins), load_entrypoints=False)


async def test_the_same_objects_get_the_same_table_and_see_every_call():
    s, seen = sampler(), HookRecorder()
    first = s.plugins.with_call_plugins([seen])
    assert s.plugins.with_call_plugins([seen]) is first
    assert s.plugins.with_call_plugins([HookRecorder()]) is not first  # other objects, other table
    results = [await s.sample("q", plugins=[seen]) for _ in range(3)]
    assert seen.sampling_ids() == [r.sampling_id for r in results]
    assert s.plugins.names() == []  # nothing was registered on the sampler


async def test_a_change_to_the_registry_is_seen_by_the_next_call():
    s, seen, later = sampler(), HookRecorder(), HookRecorder()
    first = await s.sample("q", plugins=[seen])
    s.register(later, name="later")
    second = await s.sample("q", plugins=[seen])
    assert seen.sampling_ids() == [first.sampling_id, second.sampling_id]
    assert later.sampling_ids() == [second.sampling_id]
    s.plugins.unregister("later")
    third = await s.sample("q", plugins=[seen])
    assert (
        later.sampling_ids() == [second.sampling_id]
        and seen.sampling_ids()[-1] == third.sampling_id
    )


async def test_a_monitor_added_later_sees_the_call_plugins():
    s, seen, watched = sampler(), HookRecorder(), []
    await s.sample("q", plugins=[seen])
    s.plugins.add_hookcall_monitoring(
        lambda name, impls, kwargs: watched.append((name, [i.plugin_name for i in impls])),
        lambda *args: None,
    )
    await s.sample("q", plugins=[seen])
    assert ("sampling_loop_end", ["HookRecorder"]) in watched


def test_names_are_resolved_afresh_for_every_call():
    s = sampler()
    assert s.plugins.with_call_plugins(["ordering"]) is not s.plugins.with_call_plugins(
        ["ordering"]
    )


def test_at_most_size_tables_are_kept_most_recent_first():
    s = sampler()
    tables = CallTables(size=2)
    base = s.plugins.hooks()
    a, b, c = (HookRecorder(),), (HookRecorder(),), (HookRecorder(),)
    table_a, table_b, table_c = (s.plugins.with_call_plugins(p) for p in (a, b, c))
    tables.put(base, a, table_a)
    tables.put(base, b, table_b)
    assert tables.get(base, a) is table_a  # a is now the most recent
    tables.put(base, c, table_c)  # b goes
    assert tables.get(base, b) is None
    assert tables.get(base, a) is table_a and tables.get(base, c) is table_c
    s.register(HookRecorder())  # the registry changes: another registry table
    assert tables.get(s.plugins.hooks(), a) is None
    assert tables.get(base, a) is None  # and the stale entry was dropped


async def test_an_instance_with_a_hook_of_its_own_is_read_as_it_is():
    calls: list[str] = []

    class Plain:
        @hookimpl
        def sampling_loop_end(self, payload):
            calls.append("class")

    s = sampler()
    await s.sample("q", plugins=[Plain()])  # the class's hooks are read and kept

    @hookimpl
    def own_start(payload):
        calls.append("own start")

    extra = Plain()
    extra.sampling_loop_start = own_start  # a hook on the instance only
    await s.sample("q", plugins=[extra])
    shadowed = Plain()
    shadowed.sampling_loop_end = lambda payload: calls.append("not a hook")
    await s.sample("q", plugins=[shadowed])
    assert calls == ["class", "own start", "class"]
