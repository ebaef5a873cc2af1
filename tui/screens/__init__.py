"""Screens of the terminal UI, one per file."""
