"""Render the config templates in ``stack/config`` and ``stack/connectors``.

Only ``{known_name}`` tokens are replaced, so ``${env:CDC_PG_PASSWORD}`` (resolved by
Kafka Connect's EnvVarConfigProvider inside the worker) passes through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from .errors import StackError
from .settings import CONFIG_TEMPLATES

_TOKEN = re.compile(r"(?<!\$)\{([a-z_][a-z0-9_]*)\}")


def render_text(text: str, values: Mapping[str, object], source: str) -> str:
    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise StackError("config", f"{source}: unknown placeholder {{{key}}}")
        return str(values[key])

    return _TOKEN.sub(sub, text)


def render(template: str, target: Path, values: Mapping[str, object]) -> Path:
    """Render ``stack/config/<template>`` into ``target`` (rewritten every time)."""
    source = CONFIG_TEMPLATES / template
    text = render_text(source.read_text(), values, str(source))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target
