"""The quickstart: sample, validate, repair, and watch every hook through a plugin."""

from hook_specs import hookimpl
from sampling_core import RepairTemplate, ScriptedBackend, sample_sync
from sampling_core.requirements import max_words


class ShowAttempts:
    """Prints each attempt as it completes, and each repair."""

    @hookimpl
    def sampling_iteration(self, payload):
        print(
            f"iteration {payload.iteration} (subsample {payload.subsample_index}, "
            f"attempt {payload.attempt}, sequence {payload.sequence}): "
            f"passed={payload.passed} {payload.text!r}"
        )

    @hookimpl
    def sampling_repair(self, payload):
        print(f"  repair before attempt {payload.next_attempt}: {payload.failure_reasons}")


def main() -> None:
    backend = ScriptedBackend(
        ["The sea is a vast, restless and shining plain of water.", "Endless blue, restless, deep."]
    )
    result = sample_sync(
        "Describe the sea in at most five words.",
        backend=backend,
        requirements=[max_words(5)],
        strategy=RepairTemplate(),
        loop_budget=3,
        plugins=[ShowAttempts()],
    )
    print(f"success={result.success} stop_reason={result.stop_reason} text={result.text!r}")


if __name__ == "__main__":
    main()
