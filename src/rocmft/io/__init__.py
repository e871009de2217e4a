"""The shared floor: where the project's files are (paths), host-side file I/O that never follows a link (hostio),
bounded YAML (yamlio), terminal-safe text (safe_text), the Problem every stage reports, the Hub cache's layout.

May import: nothing of rocmft.
"""
