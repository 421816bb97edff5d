"""`dbt docs generate`'s site, served over HTTP and read in headless Chromium (Debian's
/usr/bin/chromium, which `make setup` installs): the lineage graph runs from the bronze
sources through silver to gold, and every model's page shows its description and a
description for every column. What the pages must show comes from the models' YAML
(descriptions) and the manifest dbt writes (lineage), never from the pages.

The site is generated without a build (`dbt parse`, then `dbt docs generate --no-compile
--empty-catalog`): descriptions and lineage are the manifest's, and need no table. The
lineage screenshot goes to the test's tmp folder, or with CDC_UPDATE_SCREENSHOT=1 to
docs/images/lineage.png (docs/how-to/browse-the-dbt-docs.md)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.support.lakehouse import dbt
from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = ROOT / "docs" / "images" / "lineage.png"
# What the screenshot and the lineage check select: every gold model and all it is built from.
GOLD_LINEAGE = "+tag:gold"
# What a model's depends_on holds that the graph draws (the macros it calls are not drawn).
GRAPH_KINDS = ("model", "source", "seed", "snapshot")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated site's folder (index.html, manifest.json, catalog.json)."""
    target = tmp_path_factory.mktemp("dbt-docs") / "target"
    dbt("parse", "--target-path", str(target))
    dbt("docs", "generate", "--no-compile", "--empty-catalog", "--target-path", str(target))
    for name in ("index.html", "manifest.json", "catalog.json"):
        assert (target / name).is_file(), f"dbt docs generate wrote no {name} in {target}"
    return target


@pytest.fixture(scope="module")
def manifest(site: Path) -> dict:
    return json.loads((site / "manifest.json").read_text())


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass  # no line per request in the test's output


@pytest.fixture(scope="module")
def site_url(site: Path) -> Iterator[str]:
    """The site served on 127.0.0.1 on a free port, as `dbt docs serve` serves it."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} missing: run `make setup` (installs Debian's chromium)", pytrace=False)
    # Chromium will not start its sandbox as root ("Running as root without --no-sandbox
    # is not supported"), so a root run turns it off; the page is only our local site.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
        yield chromium
        chromium.close()


def open_page(browser: Browser, site_url: str, route: str) -> Page:
    """A fresh page (the app reads the graph's selection only when it loads) at
    `route` of the site; requests anywhere else are refused, so nothing leaves the machine."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.set_default_timeout(30_000)
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(site_url) else r.abort())
    page.goto(site_url + route)
    return page


def wait_rendered(page: Page) -> None:
    """Until the browser has painted twice since now, so the graph's canvas shows the layout."""
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def models(manifest: dict) -> dict[str, dict]:
    return {uid: node for uid, node in manifest["nodes"].items() if node["resource_type"] == "model"}


def layer(node: dict) -> str:
    """bronze, silver or gold: a source's schema, or a model's folder under models/."""
    if node["resource_type"] == "source":
        return node["source_name"]
    return Path(node["original_file_path"]).parts[1] if node["resource_type"] == "model" else node["resource_type"]


def expected_lineage(manifest: dict, roots: list[str]) -> tuple[set[str], set[tuple[str, str]]]:
    """The nodes and (parent, child) edges of `roots` and everything they are built from,
    from what each model's SQL refers to (its depends_on)."""
    nodes, edges, todo = set(), set(), list(roots)
    while todo:
        uid = todo.pop()
        if uid in nodes:
            continue
        nodes.add(uid)
        for parent in manifest["nodes"].get(uid, {}).get("depends_on", {}).get("nodes", []):
            if parent.split(".", 1)[0] in GRAPH_KINDS:
                edges.add((parent, uid))
                todo.append(parent)
    return nodes, edges


def ancestors(uid: str, edges: set[tuple[str, str]]) -> set[str]:
    """What `uid` is built from, following (parent, child) `edges` upwards."""
    found, todo = set(), [uid]
    while todo:
        child = todo.pop()
        for parent, of in edges:
            if of == child and parent not in found:
                found.add(parent)
                todo.append(parent)
    return found


# The lineage graph dbt-docs draws (its Cytoscape graph, window.graph): nodes, (parent,
# child) edges, labels, and whether every node is drawn inside the graph's visible panel.
READ_GRAPH = """() => {
    const g = window.graph, panel = document.getElementById('cy');
    if (!g || !panel) return {nodes: [], edges: [], labels: [], laid_out: false};
    const visible = panel.checkVisibility({opacityProperty: true, visibilityProperty: true});
    const w = g.width(), h = g.height();
    return {
        nodes: g.nodes().map(n => n.id()),
        edges: g.edges().map(e => [e.source().id(), e.target().id()]),
        labels: g.nodes().map(n => n.data('label')),
        laid_out: visible && w > 0 && h > 0 && g.nodes().every(n => {
            const b = n.renderedBoundingBox();
            return b.w > 0 && b.h > 0 && b.x1 >= 0 && b.y1 >= 0 && b.x2 <= w && b.y2 <= h;
        }),
    };
}"""


def test_the_lineage_graph_runs_from_bronze_through_silver_to_gold(browser, site_url, manifest, tmp_path):
    everything = {**manifest["nodes"], **manifest["sources"]}
    gold = sorted(uid for uid, node in models(manifest).items() if layer(node) == "gold")
    assert len(gold) >= 5, gold
    want_nodes, want_edges = expected_lineage(manifest, gold)

    page = open_page(browser, site_url, f"#!/overview?g_v=1&g_i={quote(GOLD_LINEAGE)}")
    try:
        page.wait_for_function(f"count => {{ const g = ({READ_GRAPH})(); return g.nodes.length === count && g.laid_out; }}",
                               arg=len(want_nodes))
    except PlaywrightTimeout:
        pass  # the assertions below say what the page drew instead
    drawn = page.evaluate(READ_GRAPH)
    assert drawn["nodes"], "the site drew no lineage graph"
    assert drawn["laid_out"], "the graph's nodes are not all drawn inside its visible panel"
    got_nodes, got_edges = set(drawn["nodes"]), {tuple(edge) for edge in drawn["edges"]}
    assert got_nodes == want_nodes, (
        f"graph lacks {sorted(want_nodes - got_nodes)}, has extra {sorted(got_nodes - want_nodes)}")
    assert got_edges == want_edges, (
        f"graph lacks edges {sorted(want_edges - got_edges)}, has extra {sorted(got_edges - want_edges)}")
    assert all(drawn["labels"]), "a graph node has no label"

    # Bronze to gold on the drawn edges: each gold model is built from silver models,
    # and each of those from bronze sources.
    for uid in gold:
        silver = {a for a in ancestors(uid, got_edges) if layer(everything[a]) == "silver"}
        assert silver, f"{uid}: no silver model in its lineage graph"
        for model in silver:
            assert any(layer(everything[a]) == "bronze" for a in ancestors(model, got_edges)), \
                f"{uid}: its silver ancestor {model} comes from no bronze source in the graph"
    assert {"bronze", "silver", "gold"} <= {layer(everything[uid]) for uid in got_nodes}

    wait_rendered(page)
    out = SCREENSHOT if os.environ.get("CDC_UPDATE_SCREENSHOT") == "1" else tmp_path / SCREENSHOT.name
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page.close()


def plain(text: str) -> str:
    """Markdown or the text the page renders from it, without the marks and spacing that
    differ between them: `[x](url)` is x, and code ticks, emphasis and heading marks go."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*_#>]", "", text)
    return " ".join(text.split())


# A model page's title, description and columns (name and description) after a click on
# every column's row, which shows its description; a description hidden or absent is ''.
READ_MODEL_PAGE = """() => {
    const shown = el => el && el.checkVisibility({opacityProperty: true, visibilityProperty: true}) ? el.innerText : '';
    const details = document.querySelector('.app-details');
    const rows = Array.from(document.querySelectorAll('tr.column-row'));
    rows.forEach(row => row.click());
    return {
        title: (document.querySelector('.app-title h1 .break') || {}).textContent,
        description: shown(details && details.querySelector('[marked="model.description"]')),
        columns: rows.map(row => ({
            name: row.querySelector('td').innerText.trim(),
            description: shown(row.nextElementSibling.querySelector('[marked="column.description"]')),
        })),
    };
}"""


DOC_BLOCK = re.compile(r"\{%-?\s*docs\s+(\w+)\s*-?%\}(.*?)\{%-?\s*enddocs\s*-?%\}", re.S)
DOC_REF = re.compile(r"""\{\{\s*doc\(\s*['"](\w+)['"]\s*\)\s*\}\}""")


def described_in_yaml() -> dict[str, dict]:
    """Each model's description and its columns' (name: description, in order) as the
    models' YAML under models/ writes them, with `{{ doc('x') }}` replaced by its block."""
    blocks = {name: body.strip() for path in (ROOT / "models").rglob("*.md")
              for name, body in DOC_BLOCK.findall(path.read_text())}

    def text(node: dict) -> str:
        return DOC_REF.sub(lambda ref: blocks.get(ref.group(1), ""), str(node.get("description") or ""))

    described = {}
    for path in sorted((ROOT / "models").rglob("_*__models.yml")):
        for model in yaml.safe_load(path.read_text())["models"]:
            described[model["name"]] = {
                "description": text(model),
                "columns": {column["name"]: text(column) for column in model.get("columns", [])},
            }
    return described


def test_every_model_page_shows_its_description_and_every_column_described(browser, site_url, manifest):
    expected = described_in_yaml()
    page_of = {node["name"]: uid for uid, node in models(manifest).items()}
    on_disk = {path.stem for path in (ROOT / "models").rglob("*.sql")}
    assert set(expected) == on_disk == set(page_of), (
        f"models/**/*.sql {sorted(on_disk)}, in the YAML {sorted(expected)}, in the site {sorted(page_of)}")

    page = open_page(browser, site_url, "#!/overview")
    problems = []
    for name, want in sorted(expected.items()):
        columns = want["columns"]
        page.goto(f"{site_url}#!/model/{page_of[name]}")
        try:
            page.wait_for_function(
                """([name, count]) => {
                    const title = document.querySelector('.app-title h1 .break');
                    return title && title.textContent.trim() === name
                        && document.querySelectorAll('tr.column-row').length === count;
                }""", arg=[name, len(columns)], timeout=10_000)
        except PlaywrightTimeout:
            pass  # what the page shows instead is reported below
        shown = page.evaluate(READ_MODEL_PAGE)
        if (shown["title"] or "").strip() != name:
            problems.append(f"{name}: its page did not open (title {shown['title']!r})")
            continue
        if not plain(want["description"]):
            problems.append(f"{name}: no description in the YAML")
        elif plain(shown["description"]) != plain(want["description"]):
            problems.append(f"{name}: page shows description {shown['description']!r}")
        shown_columns = {column["name"]: column["description"] for column in shown["columns"]}
        if list(shown_columns) != list(columns):
            problems.append(f"{name}: page lists columns {list(shown_columns)}, the YAML {list(columns)}")
        if not columns:
            problems.append(f"{name}: no columns in the YAML")
        for column, description in columns.items():
            if not plain(description):
                problems.append(f"{name}.{column}: no description in the YAML")
            elif plain(shown_columns.get(column, "")) != plain(description):
                problems.append(f"{name}.{column}: page shows {shown_columns.get(column)!r}, not its description")
    page.close()
    assert not problems, f"{len(problems)} problems on {len(expected)} model pages:\n" + "\n".join(problems)
