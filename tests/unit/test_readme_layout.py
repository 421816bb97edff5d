"""README's layout table names every folder a newcomer looks for, and only folders that
exist: checked against the tree, so that a folder added or renamed fails here until the
table says where it is."""

from __future__ import annotations

import re
import subprocess

from tests.support.paths import ROOT

# docs/ has a table of its own (More).
NOT_IN_LAYOUT = {"docs"}


def layout_rows() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    table = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("folder", "---"):
            rows.append((cells[0], cells[1]))
    return rows


def tracked_folders() -> set[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    folders = set()
    for path in files.splitlines():
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {f for f in folders if not any(part.startswith((".", "_")) for part in f.split("/"))}


def test_every_path_the_layout_names_exists() -> None:
    named = [p for first, _ in layout_rows() for p in re.findall(r"`([^`]+)`", first)]
    assert named
    missing = [p for p in named if not (ROOT / p).exists()]
    assert not missing, f"README's layout table names paths that do not exist: {missing}"


def test_every_top_folder_and_each_macro_and_test_folder_is_in_the_layout() -> None:
    rows = layout_rows()
    first_cells = " ".join(first for first, _ in rows)
    tests_row = next(what for first, what in rows if first == "`tests/`")
    folders = tracked_folders()
    wanted = {f for f in folders if "/" not in f} - NOT_IN_LAYOUT
    wanted |= {f for f in folders if re.fullmatch(r"macros/[^/]+|macros/materializations/[^/]+", f)}
    # named as itself or through a folder under it (`models/silver/` names models/)
    missing = sorted(f for f in wanted if f"`{f}/" not in first_cells)
    assert not missing, f"README's layout table does not say where these are: {missing}"
    test_folders = sorted(f.split("/")[1] for f in folders if re.fullmatch(r"tests/[^/]+", f))
    unnamed = [f for f in test_folders if f"`{f}/`" not in tests_row]
    assert not unnamed, f"README's tests/ row does not name: {unnamed}"
