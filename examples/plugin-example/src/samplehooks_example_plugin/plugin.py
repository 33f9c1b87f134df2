"""``ExamplePlugin``: two hooks, one that changes what is sent and one that only watches."""

from __future__ import annotations

from collections import OrderedDict

from hook_specs import GenerationPreCallPayload, SamplingIterationPayload, hookimpl

DEFAULT_SYSTEM_PROMPT = "Answer in one short sentence."


class ExamplePlugin:
    """Adds a system message to every backend call and counts attempts per ``sample()`` call.

    The entry point names the class; samplehooks instantiates it with no arguments. Counts
    are kept for the last ``keep_calls`` calls only, so a long-running process does not grow.
    """

    def __init__(self, system_prompt: str = DEFAULT_SYSTEM_PROMPT, keep_calls: int = 100) -> None:
        self.system_prompt = system_prompt
        self.keep_calls = keep_calls
        self.attempts: OrderedDict[str, int] = OrderedDict()

    @hookimpl
    def generation_pre_call(self, payload: GenerationPreCallPayload) -> None:
        """Put our system message first, unless the prompt already has one.

        ``messages`` is writable in this hook. Assign a new list, as here; the message
        dicts inside are shared with the call's prompt, so replace them, never edit them.
        """
        if not any(m.get("role") == "system" for m in payload.messages):
            system = {"role": "system", "content": self.system_prompt}
            payload.messages = [system, *payload.messages]

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """Count the completed attempt. Observe only: this hook may not change anything."""
        self.attempts[payload.sampling_id] = self.attempts.get(payload.sampling_id, 0) + 1
        self.attempts.move_to_end(payload.sampling_id)
        while len(self.attempts) > self.keep_calls:
            self.attempts.popitem(last=False)
