"""Generators: pure functions that turn upstream templates and lexicons into benchmark rows."""
