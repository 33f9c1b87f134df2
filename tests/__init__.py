"""The test suite: one folder per part of the code, cross-cutting suites, and
``support`` (what the tests share). Each folder is a package of ``tests``."""
