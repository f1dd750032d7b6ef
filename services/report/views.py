"""A report's tables as plain values: what the terminal, Markdown and HTML each render."""

from dataclasses import dataclass


@dataclass(frozen=True)
class TableView:
    """One table of a report: its title (printed above it), header, rows, and the columns a
    terminal aligns left (the others, numbers, right)."""

    title: str
    header: list[str]
    rows: list[list[str]]
    left: list[str]
