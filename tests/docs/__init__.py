"""Tests of the docs site: the hook reference, the examples in the pages, the strict build."""
