"""Tests of cross-cutting reliability suites: bad input, hangs, secrets, damaged runs, hostile
plugins and replies."""
