"""Tests of hook delivery (``sampling_core.hooks``), plugin specs and the hook contract
(``hook_specs``)."""
