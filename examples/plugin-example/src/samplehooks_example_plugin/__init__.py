"""An example samplehooks plugin, packaged as its own distribution."""

from samplehooks_example_plugin.plugin import DEFAULT_SYSTEM_PROMPT, ExamplePlugin

__all__ = ["DEFAULT_SYSTEM_PROMPT", "ExamplePlugin"]
