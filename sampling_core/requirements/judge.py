"""``llm_judge``: a requirement decided by asking a model."""

from __future__ import annotations

from typing import Any

from hook_specs.records import Generation, ValidationResult
from sampling_core.backends.base import Backend, GenerationRequest, content_text
from sampling_core.requirements.checks import Requirement
from sampling_core.requirements.context import CheckContext

__all__ = ["llm_judge"]


def llm_judge(
    backend: Backend | None,
    question: str,
    *,
    options: dict[str, Any] | None = None,
) -> Requirement:
    """Ask a model ``question`` about the answer; it passes when the reply starts with "yes".

    The judge sees the prompt the attempt answered (``CheckContext.messages``) and the
    answer. Inside ``sample()`` its call goes through the engine's backend path
    (``CheckContext.generate``): the generation hooks fire with ``payload.purpose ==
    "judge"``, transient failures are retried, its tokens count in the call's ``usage``.
    ``backend=None`` judges with the sampler's own backend. Run on its own (no call), the
    check calls ``backend`` directly.
    """

    async def check(text: str, context: CheckContext) -> ValidationResult:
        asked = [content_text(m.get("content", "")) for m in context.messages]
        question_part = f"The request was:\n{asked[-1]}\n\n" if asked else ""
        prompt = (
            f"{question}\n\n{question_part}Answer to judge:\n{text}\n\n"
            "Reply with YES or NO first, then one sentence saying why."
        )
        request = GenerationRequest(
            messages=[{"role": "user", "content": prompt}], options=dict(options or {})
        )
        if context.generate is not None:
            reply: Any = await context.generate(request, backend)
        elif backend is not None:
            reply = await backend.generate(request)
        else:
            raise ValueError(
                "llm_judge(None, ...) judges with the sampler's backend: use it in sample()"
            )
        verdict = reply.text if isinstance(reply, Generation) else str(reply)
        head = verdict.strip().lower()
        if head.startswith("yes"):
            return ValidationResult(True)
        return ValidationResult(False, f"A judge answered {question!r} with: {verdict.strip()}")

    return Requirement(f"judge: {question}", check)
