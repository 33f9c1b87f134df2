"""Tests of ``builtin_plugins``, and plugins installed the way users install them."""
