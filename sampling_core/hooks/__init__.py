"""Hook delivery: plugins registered, compiled into tables, and fired for the engine.

Internal: plugins use :mod:`hook_specs`; callers use :class:`sampling_core.Sampler` and its
``plugins`` registry. Its modules, downhill: ``registry`` (a sampler's plugins on a pluggy
manager; the one resolver of plugin specs) → ``entry_points`` (installed plugins) and
``options`` (plugin options as pydantic models) → ``channel`` (one call's hook channel:
fires a hook with one call) → ``background`` (``@background`` observers' delivery) →
``table`` (what a registry compiles its plugins into) → ``faults``.
"""
