"""Tests of property tests: the engine's invariants over random scenarios and faults."""
