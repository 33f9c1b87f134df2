"""Every call's ``sampling_id``: 16 hex digits, distinct across calls, seeds and forks."""

from __future__ import annotations

import multiprocessing
import random
import re

from sampling_core import Sampler, ScriptedBackend
from sampling_core.engine.sampler import new_sampling_id


def test_ids_are_sixteen_hex_digits_and_distinct():
    ids = {new_sampling_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)


def test_seeding_the_global_random_state_does_not_repeat_ids():
    random.seed(7)
    first = new_sampling_id()
    random.seed(7)
    assert new_sampling_id() != first


def _child_id(queue) -> None:
    queue.put(new_sampling_id())


def test_a_forked_child_does_not_repeat_its_parents_next_id():
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_id, args=(queue,))
    child.start()
    from_child = queue.get(timeout=30)
    child.join(timeout=30)
    assert child.exitcode == 0
    assert from_child != new_sampling_id()  # the child was reseeded, not a copy of us


def test_each_call_has_its_own_id_seen_by_every_event():
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    results = [sampler.sample_sync("q") for _ in range(3)]
    ids = [r.sampling_id for r in results]
    assert len(set(ids)) == 3 and all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)
