"""The settings of ``budget_guard`` (internal): names, aliases, checks, and the environment."""

from __future__ import annotations

from typing import Any

__all__ = ["ENV_VAR", "SETTINGS", "alias", "dollars", "is_int", "read_env", "setting"]

ENV_VAR = "SAMPLEHOOKS_BUDGET_GUARD"
SETTINGS = (
    "max_loop_budget",
    "max_concurrency_budget",
    "max_generations_per_call",
    "max_tokens_per_call",
    "max_generations_total",
    "max_tokens_total",
    "max_usd_per_call",
    "max_usd_total",
)
DOLLARS = ("max_usd_per_call", "max_usd_total")
ALIASES = {"max_tokens": "max_tokens_per_call", "max_usd": "max_usd_per_call"}


def alias(short: str, given: Any, full: Any) -> Any:
    """The value of the setting ``ALIASES[short]``, given under either name (not two)."""
    if given is None:
        return full
    if full is not None and full != given:
        raise ValueError(
            f"BudgetGuard: {short} is another name for {ALIASES[short]}; "
            f"give one, not both ({given} and {full})"
        )
    return given


def is_int(value: Any) -> bool:
    """Whether ``value`` is an int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def setting(name: str, value: int | None, env: dict[str, int]) -> int | None:
    """The integer setting ``name``: ``value``, else from ``env``; checked (>= 1)."""
    if value is None:
        value = env.get(name)
    if value is None:
        return None
    if not is_int(value):
        raise TypeError(f"BudgetGuard({name}=...) must be an int, not {value!r}")
    if value < 1:
        raise ValueError(f"BudgetGuard({name}={value}) must be >= 1")
    return value


def dollars(name: str, value: float | None, env: dict[str, float]) -> float | None:
    """The dollar setting ``name``: ``value``, else from ``env``; checked (> 0)."""
    if value is None:
        value = env.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"BudgetGuard({name}=...) must be a number of dollars, not {value!r}")
    if not value > 0:
        raise ValueError(f"BudgetGuard({name}={value}) must be > 0")
    return float(value)


def read_env(environ: Any) -> dict[str, Any]:
    """The settings written in ``environ[ENV_VAR]`` (``name=value`` pairs, commas between)."""
    raw = environ.get(ENV_VAR, "")
    settings: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, sep, value = part.partition("=")
        name = ALIASES.get(name.strip(), name.strip())
        if not sep or name not in SETTINGS:
            raise ValueError(
                f"{ENV_VAR}: cannot read {part!r}; write name=value pairs separated by "
                f"commas, with names among: {', '.join((*SETTINGS, *ALIASES))}"
            )
        try:
            settings[name] = float(value) if name in DOLLARS else int(value)
        except ValueError:
            kind = "a number" if name in DOLLARS else "an integer"
            raise ValueError(f"{ENV_VAR}: {name} must be {kind}, not {value!r}") from None
    return settings
