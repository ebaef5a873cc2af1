"""Widgets of the terminal UI, one per file."""
