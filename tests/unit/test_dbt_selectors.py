"""selectors.yml: the named runs select what their descriptions say, computed here from
the model files and their refs, not from dbt."""

from __future__ import annotations

import re

from dbt.cli.main import dbtRunner

from tests.support.paths import ROOT

MODELS = ROOT / "models"


def selected(selector: str) -> set[str]:
    result = dbtRunner().invoke(["ls", "--selector", selector, "--resource-type", "model", "--output", "name",
                                 "--project-dir", str(ROOT), "--profiles-dir", str(ROOT / "profiles"), "--quiet"])
    assert result.success, result.exception
    return set(result.result)


def models_in(folder: str) -> set[str]:
    return {path.stem for path in (MODELS / folder).rglob("*.sql")}


def upstream(model: str) -> set[str]:
    """`model` and every model its SQL refs, transitively (sources are not models)."""
    paths = {path.stem: path for path in MODELS.rglob("*.sql")}
    seen, todo = set(), [model]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += re.findall(r"ref\('(\w+)'\)", paths[name].read_text())
    return seen


def test_silver_selects_every_silver_model_and_nothing_else() -> None:
    assert selected("silver") == models_in("silver")
    assert {"actor", "actor_history", "payment"} <= models_in("silver")


def test_gold_nightly_selects_the_gold_models_only() -> None:
    assert selected("gold_nightly") == models_in("gold")


def test_the_dashboard_selector_takes_what_the_exposure_reads_and_its_parents() -> None:
    expected = upstream("revenue_by_category_month") | upstream("film_catalog")
    assert {"payment", "rental", "category", "film", "language"} <= expected
    assert selected("revenue_dashboard") == expected
