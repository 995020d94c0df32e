"""Escaping for names and messages that come from files (model names, node names, reasons).

Every text that did not come from this program's own source goes through one of these before it
reaches a sink that interprets it:

- :func:`plain` for a terminal through ``click.echo``: control characters (escape sequences,
  carriage returns, bidi overrides) are shown as ``\\x1b``-style escapes, never executed.
- :func:`term` for a ``rich`` console or table: :func:`plain`, then rich markup escaped.
- :func:`md` for a Markdown table cell or paragraph: HTML and Markdown syntax escaped.
- :func:`csv_cell` for a spreadsheet cell: a leading ``=``, ``+``, ``-``, ``@`` (a formula) is
  neutralized with a leading apostrophe.
- :func:`plot_text` for matplotlib labels and titles: ``$`` (mathtext) shown literally.
- file names: :func:`ios_core.names.file_part`.
(HTML uses ``html.escape``.)
"""

from __future__ import annotations

import html
import re

from ios_core.names import file_part

__all__ = ["csv_cell", "file_part", "md", "one_line", "plain", "plot_text", "term"]

# C0 controls except tab/newline, DEL, C1 controls, and the Unicode bidi/format controls that
# reorder what a terminal shows (Trojan Source).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def plain(text, newlines: bool = True) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``), never interpreted.
    ``newlines=False`` also escapes newlines and tabs (for one-line output)."""
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))
    if not newlines:
        text = text.replace("\n", "\\n").replace("\t", "\\t")
    return text


def one_line(text) -> str:
    """:func:`plain` on one line (newlines and tabs escaped too): a name in a message."""
    return plain(text, newlines=False)


def term(text, newlines: bool = True) -> str:
    """For rich: :func:`plain`, then markup (``[red]``, ``[/]``) shown literally."""
    from rich.markup import escape

    return escape(plain(text, newlines))


# Inline Markdown syntax; line-start syntax (#, -, +, >) cannot occur: every line we write starts
# with our own text or a table's "| ".
_MD_SPECIAL = re.compile(r"([\\`*{}\[\]|~])")
# An underscore inside a word (inception_v3) never starts emphasis; one at a word's edge may.
_MD_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


# A figure we formatted ("1.2 ±0.1", "100.0 [90.9-111.1]", "2.00x"): no letters, parentheses or
# colons, so its brackets cannot form a link; left as it is so the Markdown stays readable.
_MD_FIGURE = re.compile(r"[0-9.,±\s\[\]+\-x%e]*")


def md(text) -> str:
    """For Markdown (a table cell or a paragraph): one line, HTML and Markdown syntax inert."""
    text = plain(text, newlines=False)
    if _MD_FIGURE.fullmatch(text):
        return text
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
    return _MD_EDGE_UNDERSCORE.sub(r"\\_", text)


def csv_cell(value):
    """For a CSV cell: strings that a spreadsheet would run as a formula get a leading ``'``."""
    if isinstance(value, str):
        value = plain(value, newlines=False)
        if value[:1] in ("=", "+", "-", "@", "\t", "\r", "|", "%"):
            return "'" + value
    return value


def plot_text(text) -> str:
    """For matplotlib: one line, ``$...$`` not parsed as mathtext (an unbalanced ``$`` would crash)."""
    return plain(text, newlines=False).replace("$", r"\$")
