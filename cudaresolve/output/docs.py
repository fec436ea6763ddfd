"""Where a user reads the documentation: the one base URL every help text and message names (an
installed user has no docs/ directory).

May import: nothing of cudaresolve.
"""

DOCS = "https://github.com/cudaresolve/cudaresolve/blob/main/docs/"


def docs_url(page: str) -> str:
    """The URL of one page of docs/, e.g. docs_url("cli.md")."""
    return DOCS + page
