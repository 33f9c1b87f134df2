"""The example plugin's own tests, written with samplehooks' pytest fixtures.

``hook_recorder``, ``scripted_backend`` and ``sampler`` come from samplehooks' pytest plugin
(a ``pytest11`` entry point): installing samplehooks is all it takes.
"""

from hook_specs import HookName

from samplehooks_example_plugin import DEFAULT_SYSTEM_PROMPT, ExamplePlugin


def test_adds_the_system_message_and_counts_attempts(sampler, scripted_backend, hook_recorder):
    plugin = ExamplePlugin()
    backend = scripted_backend(["no", "yes"])
    result = sampler(backend, plugins=[plugin]).sample_sync(
        "Say yes.", requirements=[lambda text: text == "yes"], loop_budget=2
    )

    assert result.success
    assert plugin.attempts == {result.sampling_id: 2}
    for request in backend.requests:
        assert request.messages[0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
    (first_call, _) = hook_recorder.for_hook(HookName.GENERATION_PRE_CALL)
    assert first_call["messages"][0]["role"] == "system"


def test_keeps_a_system_message_the_prompt_already_has(sampler, scripted_backend):
    backend = scripted_backend(["hi"])
    prompt = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi."}]
    sampler(backend, plugins=[ExamplePlugin()]).sample_sync(prompt)
    assert backend.requests[0].messages == prompt


def test_remembers_only_the_last_calls(sampler):
    plugin = ExamplePlugin(keep_calls=2)
    s = sampler(plugins=[plugin])
    ids = [s.sample_sync("Hi.").sampling_id for _ in range(3)]
    assert list(plugin.attempts) == ids[1:]


def test_its_kinds_with_options(sampler):
    from sampling_core.kinds import KindError, KindRegistry

    from samplehooks_example_plugin import kinds

    registry = KindRegistry()
    registry.add_plugin("example-kinds", kinds)
    backend = registry.backend("echo", upper=True)
    result = sampler(backend).sample_sync(
        "hello",
        requirements=[registry.requirement("starts_with", "YOU SAID", case_sensitive=True)],
        strategy=registry.strategy("nudge", word="Kindly"),
    )
    assert result.success and result.text == "YOU SAID: HELLO"
    try:
        registry.backend("echo", uper=True)
    except KindError as exc:
        assert "did you mean 'upper'?" in str(exc)
    else:
        raise AssertionError("a misspelt option was accepted")
