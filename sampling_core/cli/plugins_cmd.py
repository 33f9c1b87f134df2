"""``samplehooks plugins``: every installed plugin, the hooks it implements, and whether it loads.

Each entry point of group ``samplehooks`` is loaded on its own and registered on a fresh
registry, so one broken plugin (an import error, an unknown hook, a refused wrapper) is
listed as not loaded with its error and never hides the others. The command exits 0 either
way: it is a diagnostic, and a broken plugin is exactly what it is meant to show.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hook_specs.names import HookName
from sampling_core.cli.plugin_template import TemplateError, write_plugin
from sampling_core.cli.readable import ReadableCommand, ReadableGroup, fail
from sampling_core.errors import exception_text
from sampling_core.hooks.entry_points import (
    InstalledPlugin,
    PluginSettings,
    installed_plugins,
    instantiate,
)
from sampling_core.hooks.registry import PluginRegistry
from sampling_core.kinds import KindError, KindRegistry

__all__ = ["inspect_plugins", "plugins_app", "plugins_command"]

_HOOK_ORDER = {hook.value: position for position, hook in enumerate(HookName)}


def inspect_plugins(environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Load every installed plugin in isolation and describe it.

    Returns one dict per entry point, sorted by name, with ``name``, ``value`` (the entry
    point's target), ``distribution``, ``version``, ``builtin``, ``enabled`` (whether a
    ``Sampler`` created with this environment loads it without being asked), ``loaded``,
    ``hooks`` (in the order of ``HookName``), ``error`` (``None`` when it loaded) and
    ``provides``: the requirement, backend and strategy kinds it registers, by area.
    """
    settings = PluginSettings.from_env(environ)
    described = []
    for entry in installed_plugins():
        _load_alone(entry)
        provides = _kinds_alone(entry) if entry.loaded else {}
        described.append(
            {**entry.report(), "enabled": _enabled(entry, settings), "provides": provides}
        )
    return described


def _kinds_alone(entry: InstalledPlugin) -> dict[str, list[str]]:
    """The kinds one plugin registers, asked on a kind registry of its own.

    A provider hook that misbehaves (raises, registers a non-callable) marks the plugin as
    not loaded with that error, as ``samplehooks run`` and ``sample`` would refuse it.
    """
    registry = KindRegistry()
    try:
        with redirect_stdout(sys.stderr):
            registry.add_plugin(entry.name, entry.load())
    except (Exception, SystemExit) as exc:
        entry.loaded = False
        entry.error = (
            exception_text(exc)
            if isinstance(exc, KindError)
            else f"{type(exc).__name__}: {exception_text(exc)}"
        )
        return {}
    provides: dict[str, list[str]] = {}
    for area, name in registry.provided.get(entry.name, []):
        provides.setdefault(area, []).append(name)
    return provides


def _load_alone(entry: InstalledPlugin) -> None:
    """Import and register one plugin on a registry of its own; record what happened."""
    registry = PluginRegistry()
    try:
        # A plugin that prints while importing must not corrupt `--json` output.
        with redirect_stdout(sys.stderr):
            registry.register(instantiate(entry.name, entry.load()), entry.name)
    except (Exception, SystemExit) as exc:
        entry.loaded = False
        entry.error = f"{type(exc).__name__}: {exception_text(exc)}"
        entry.hooks = []
        return
    entry.loaded = True
    entry.error = None
    entry.hooks = sorted(
        registry.hooks_of(entry.name), key=lambda name: (_HOOK_ORDER.get(name, 99), name)
    )


def _enabled(entry: InstalledPlugin, settings: PluginSettings) -> bool:
    """Whether a ``Sampler`` loads this entry point by the environment's rules."""
    if entry.name in settings.disabled:
        return False
    if settings.only is not None:
        return entry.name in settings.only
    return not entry.builtin


plugins_app = typer.Typer(
    cls=ReadableGroup,
    invoke_without_command=True,
    add_completion=False,
    help="List the installed plugins (and write a new one with `plugins new`).",
)


@plugins_app.command("new", cls=ReadableCommand)
def new_command(
    name: str = typer.Argument(..., help="The plugin's name (its entry point), e.g. my-checks."),
    directory: Path = typer.Option(
        Path("."), "--dir", "-d", help="Where to write samplehooks-NAME/.", show_default=True
    ),
) -> None:
    """Write a ready plugin distribution: entry point, a hook, a provider hook, a test."""
    try:
        root = write_plugin(name, directory)
    except TemplateError as exc:
        fail(exception_text(exc))
    typer.echo(f"wrote {root}; next: pip install -e {root} && python -m pytest {root}/tests")


@plugins_app.callback()
def plugins_command(
    ctx: typer.Context,
    as_json: bool = typer.Option(
        False, "--json", help="Print a JSON list (one object per plugin) instead of a table."
    ),
) -> None:
    """List every installed plugin: distribution, version, hooks, and whether it loaded.

    Built-in plugins are listed too; they load only when named (plugins=["tracing"] in
    code or a run config, SAMPLEHOOKS_PLUGINS=tracing). A plugin that fails to load is
    listed with its error; the command still succeeds.
    """
    if ctx.invoked_subcommand is not None:
        return
    described = inspect_plugins()
    if as_json:
        typer.echo(json.dumps(described, indent=2))
        return
    _print_table(described, Console())


def _registers(provides: dict[str, list[str]]) -> list[str]:
    """``requirement: a, b`` lines, one per area the plugin adds kinds to."""
    return [f"{area}: {', '.join(escape(n) for n in names)}" for area, names in provides.items()]


def _print_table(described: list[dict[str, Any]], console: Console) -> None:
    if not described:
        console.print("No samplehooks plugins are installed (entry-point group 'samplehooks').")
        return
    table = Table(
        title="samplehooks plugins",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    table.add_column("plugin", no_wrap=True)
    table.add_column("distribution", overflow="fold", min_width=12)
    table.add_column("kind", no_wrap=True)
    table.add_column("enabled", no_wrap=True)
    table.add_column("loaded", no_wrap=True)
    table.add_column("hooks", no_wrap=True)
    table.add_column("registers", overflow="fold")
    for plugin in described:
        source = "\n".join(filter(None, (plugin["distribution"], plugin["version"]))) or "?"
        table.add_row(
            escape(plugin["name"]),
            escape(source),
            "built-in" if plugin["builtin"] else "third-party",
            "yes" if plugin["enabled"] else "no",
            "[green]yes[/]" if plugin["loaded"] else "[red]no[/]",
            "\n".join(plugin["hooks"]) or "-",
            "\n".join(_registers(plugin["provides"])) or "-",
            end_section=True,
        )
    console.print(table)
    for plugin in described:
        if plugin["error"]:
            console.print(
                f"[red]{escape(plugin['name'])}[/] could not be loaded: {escape(plugin['error'])}",
                highlight=False,
            )
    console.print(
        "Third-party plugins load by default; built-ins only when named "
        "(plugins=[...] in code or a run config, SAMPLEHOOKS_PLUGINS=a,b). "
        "SAMPLEHOOKS_DISABLE_PLUGINS=a,b blocks plugins by name. The kinds a plugin "
        "registers are usable everywhere (--require, --backend, --strategy, a run's YAML) "
        "unless it is disabled.",
        highlight=False,
    )
