"""Benchmarks: the engine side by side with a bare asyncio loop and Mellea's sampler.

``python -m benchmarks`` runs every scenario, prints a table and one JSON line;
``python -m benchmarks --quick`` is the smoke mode CI runs (it checks that every scenario
runs and produces numbers; its timings mean little). See ``docs/benchmarks.md``.
"""
