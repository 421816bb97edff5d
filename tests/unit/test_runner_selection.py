"""runner/selection.py's pure parts: which bronze tables changed, the `dbt build`
selection, which changed tables a build took in, the project's fingerprint, the state file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import hudi_timeline, selection
from runner.selection import BuildState

SRC = "source.cdc_lakehouse.bronze."
# bronze a -> silver a (+ its test) -> gold g <- silver b <- bronze b; bronze c has no model
MANIFEST = {
    "sources": {SRC + "a": {"identifier": "t_a", "schema": "bronze"},
                SRC + "b": {"identifier": "t_b", "schema": "bronze"},
                "source.cdc_lakehouse.other.x": {"identifier": "t_x", "schema": "other"}},
    "child_map": {SRC + "a": ["model.p.a"], SRC + "b": ["model.p.b"],
                  "model.p.a": ["test.p.not_null_a", "model.p.g", "unit_test.p.a_case"],
                  "model.p.b": ["model.p.g"], "model.p.g": ["exposure.p.dash"],
                  "test.p.not_null_a": [], "exposure.p.dash": []},
}
SOURCES = selection.bronze_sources(MANIFEST, "bronze")


def test_bronze_sources_maps_each_bronze_table_to_its_source() -> None:
    assert SOURCES == {"t_a": SRC + "a", "t_b": SRC + "b"}


def test_changed_tables_are_those_whose_newest_commit_was_not_taken_in() -> None:
    newest = {"t_a": "1_2", "t_b": "3_4", "t_c": "5_6", "t_empty": None}
    assert selection.changed_tables(newest, None) == {"t_a", "t_b", "t_c"}
    state = BuildState(bronze={"t_a": "1_2", "t_b": "0_1"})
    assert selection.changed_tables(newest, state) == {"t_b", "t_c"}


def test_selection_names_each_changed_source_and_the_state_selectors(tmp_path: Path) -> None:
    assert selection.selection_args({"t_b", "t_c"}, SOURCES, tmp_path) == [
        "--select", "source:bronze.b+", "--state", str(tmp_path)]
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "run_results.json").write_text("{}")
    assert selection.selection_args(set(), SOURCES, tmp_path) == [
        "--select", "state:modified+", "result:error+", "result:fail+", "result:skipped+", "--state", str(tmp_path)]


def test_a_table_is_taken_in_only_when_every_node_below_it_ran_and_passed() -> None:
    passed = {"model.p.a": "success", "test.p.not_null_a": "pass", "model.p.g": "success"}
    # the unit test and the exposure are not run by a pass, so they do not count
    assert selection.settled({"t_a", "t_c"}, SOURCES, MANIFEST, passed) == {"t_a", "t_c"}
    assert selection.settled({"t_a"}, SOURCES, MANIFEST, {**passed, "test.p.not_null_a": "warn"}) == {"t_a"}
    for undone in ("fail", "error", "skipped"):
        assert selection.settled({"t_a"}, SOURCES, MANIFEST, {**passed, "model.p.g": undone}) == set()
    assert selection.settled({"t_a"}, SOURCES, MANIFEST, {"model.p.a": "success"}) == set()  # g not run


def test_fingerprint_changes_with_a_model_file_and_not_with_target(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    model = tmp_path / "models" / "a.sql"
    model.write_text("select 1 as x")
    before = selection.project_fingerprint(tmp_path)
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "manifest.json").write_text("{}")
    assert selection.project_fingerprint(tmp_path) == before
    model.write_text("select 2 as x")
    assert selection.project_fingerprint(tmp_path) != before
    model.rename(tmp_path / "models" / "b.sql")
    model.with_name("b.sql").write_text("select 1 as x")
    assert selection.project_fingerprint(tmp_path) != before


def test_fingerprint_reads_the_folders_dbt_project_yml_names(tmp_path: Path) -> None:
    """`test-paths: []` (this project's): a change in `tests/`, here pytest's folder, is
    not a change of the dbt project; `model-paths` moves where models are read from."""
    (tmp_path / "dbt_project.yml").write_text("name: p\nmodel-paths: [dbt_models]\ntest-paths: []\n")
    for folder, name in (("dbt_models", "a.sql"), ("models", "b.sql"), ("tests", "test_x.py")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text("select 1 as x")
    before = selection.project_fingerprint(tmp_path)
    (tmp_path / "tests" / "test_x.py").write_text("assert True")
    (tmp_path / "models" / "b.sql").write_text("select 2 as x")
    assert selection.project_fingerprint(tmp_path) == before
    (tmp_path / "dbt_models" / "a.sql").write_text("select 2 as x")
    assert selection.project_fingerprint(tmp_path) != before


def test_missing_sources_are_the_bronze_tables_a_model_reads_that_do_not_exist() -> None:
    manifest = {**MANIFEST,
                "sources": {**MANIFEST["sources"],
                            SRC + "a": {"identifier": "t_a", "schema": "bronze", "meta": {"topic": "db.s.a"}},
                            SRC + "c": {"identifier": "t_c", "schema": "bronze"}},
                "nodes": {"model.p.a": {"schema": "silver", "alias": "a", "name": "a"},
                          "model.p.b": {"schema": "silver", "alias": None, "name": "b"},
                          "model.p.g": {"schema": "gold", "alias": "g", "name": "g"},
                          "test.p.not_null_a": {"schema": "silver", "alias": "x", "name": "x"}}}
    # t_b exists; t_c has no model; t_x is not a bronze source
    missing = selection.missing_sources(manifest, "bronze", {"t_b"})
    assert missing == [selection.MissingSource("t_a", "db.s.a", "bronze.a", ("gold.g", "silver.a"))]
    assert missing[0].exclude == "source:bronze.a+"
    assert missing[0].reason() == ("bronze.t_a does not exist yet (land topic db.s.a): left out of this build: "
                                   "gold.g, silver.a")
    assert selection.missing_sources(manifest, "bronze", {"t_a", "t_b"}) == []


def test_settled_leaves_aside_the_nodes_below_a_missing_table() -> None:
    # g reads a and b; a's table is missing, so the build excluded a, its test and g
    statuses = {"model.p.b": "success"}
    assert selection.settled({"t_b"}, SOURCES, MANIFEST, statuses) == set()
    assert selection.settled({"t_b"}, SOURCES, MANIFEST, statuses, left_out=["t_a"]) == {"t_b"}


def test_target_dir_is_found_as_dbt_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dbt_project.yml").write_text("name: p\ntarget-path: out\n")
    monkeypatch.delenv("DBT_TARGET_PATH", raising=False)
    assert selection.target_dir([], tmp_path) == tmp_path / "out"
    monkeypatch.setenv("DBT_TARGET_PATH", "/elsewhere")
    assert selection.target_dir([], tmp_path) == Path("/elsewhere")
    assert selection.target_dir(["--target-path", "t2"], tmp_path) == tmp_path / "t2"
    assert selection.target_dir(["--target-path=/abs"], tmp_path) == Path("/abs")


def test_state_round_trips_and_a_broken_one_names_its_file(tmp_path: Path) -> None:
    assert selection.load_state(tmp_path) is None
    target = tmp_path / "target"
    target.mkdir()
    (target / "manifest.json").write_text('{"m": 1}')
    state = BuildState(bronze={"t_b": "3_4", "t_a": "1_2"}, project="abc")
    selection.save_state(tmp_path / "state", state, target)
    assert selection.load_state(tmp_path / "state") == state
    assert json.loads((tmp_path / "state" / "manifest.json").read_text()) == {"m": 1}
    assert not (tmp_path / "state" / "run_results.json").exists()
    (tmp_path / "state" / "state.json").write_text("{not json")
    with pytest.raises(selection.SelectionError, match="state.json cannot be read"):
        selection.load_state(tmp_path / "state")


def test_failed_last_time_reads_the_last_results(tmp_path: Path) -> None:
    assert not selection.failed_last_time(tmp_path)
    results = {"results": [{"unique_id": "model.p.a", "status": "success"}, {"unique_id": "test.p.t", "status": "warn"}]}
    (tmp_path / "run_results.json").write_text(json.dumps(results))
    assert not selection.failed_last_time(tmp_path)
    results["results"].append({"unique_id": "model.p.g", "status": "skipped"})
    (tmp_path / "run_results.json").write_text(json.dumps(results))
    assert selection.failed_last_time(tmp_path)


def test_timeline_files_give_what_the_meta_client_gives() -> None:
    names = [
        "20260101000000001.commit.requested", "20260101000000001.inflight",
        "20260101000000001_20260101000000009.commit",
        "20260102000000001.deltacommit.requested", "20260102000000001.deltacommit.inflight",
        "20260102000000001_20260102000000002.deltacommit",
        "20260103000000001.compaction.requested", "20260103000000001.compaction.inflight",
        "20260104000000001_20260104000000002.deltacommit",
        "20260105000000001_20260105000000002.clean",
        "20260106000000001.deltacommit.requested",  # a write under way
        "history",
    ]
    timeline = hudi_timeline.parse_timeline_files(names)
    assert timeline.newest_data_commit() == "20260104000000001_20260104000000002"
    assert timeline.pending_compactions() == ["20260103000000001"]
    assert timeline.delta_commits_since_compaction() == 2
    assert timeline.pending == [("20260103000000001", "compaction"), ("20260106000000001", "deltacommit")]
    compacted = hudi_timeline.parse_timeline_files(names + ["20260103000000001_20260107000000001.commit"])
    assert compacted.pending_compactions() == []
    assert compacted.delta_commits_since_compaction() == 1  # the plan left the later one out
    assert hudi_timeline.parse_timeline_files(["20260101000000001.commit.requested"]).newest_data_commit() is None
