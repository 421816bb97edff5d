"""The checks a name taken from data (a topic, a schema, a table) passes before it
reaches SQL, and how such a name is quoted."""

from __future__ import annotations

import re

IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
MAX_IDENTIFIER_LENGTH = 128


class TableNameError(ValueError):
    """A topic (or a schema name) cannot be turned into a safe SQL identifier."""


def validate_identifier(name: str, what: str = "identifier") -> str:
    """Return `name` if it is a plain lower-case SQL identifier, else raise TableNameError."""
    if not IDENTIFIER.match(name):
        raise TableNameError(f"{what} {name!r} must match {IDENTIFIER.pattern}")
    if len(name) > MAX_IDENTIFIER_LENGTH:
        raise TableNameError(f"{what} {name!r} is longer than {MAX_IDENTIFIER_LENGTH} characters")
    return name


def quote(identifier: str) -> str:
    """Backtick-quote an identifier (identifiers are validated too; quoting is belt and braces)."""
    return "`" + identifier.replace("`", "``") + "`"


def qualified(schema: str, table: str) -> str:
    return f"{quote(schema)}.{quote(table)}"
