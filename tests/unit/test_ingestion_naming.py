"""Pure helpers: topic -> table names, sink file names, the sources YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.identifiers import TableNameError, quote
from ingestion.errors import SourcesFileError
from ingestion.naming import ParsedFileName, parse_file_name, table_collisions, table_for_topic
from ingestion.sources import load_primary_keys


@pytest.mark.parametrize(
    ("topic", "table"),
    [
        ("pagila.public.film_actor", "pagila_public_film_actor"),
        ("Inventory.Customers-v2", "inventory_customers_v2"),
        ("_x", "_x"),
    ],
)
def test_table_for_topic(topic, table):
    assert table_for_topic(topic) == table


def test_table_collisions():
    assert table_collisions(["a.b", "a_b", "c.d", "9lives"]) == {
        topic: "topics 'a.b', 'a_b' all map to bronze table 'a_b'; land them into separate bronze schemas "
               "(--bronze-schema) or rename a topic"
        for topic in ("a.b", "a_b")
    }


@pytest.mark.parametrize("topic", ["9lives", "a" * 129])
def test_unmappable_topic(topic):
    with pytest.raises(TableNameError, match="table name"):
        table_for_topic(topic)


def test_quote_escapes_backticks():
    assert quote("a`b") == "`a``b`"


def test_parse_file_name():
    assert parse_file_name("pagila.public.actor+3+00042.json") == ParsedFileName("pagila.public.actor", 3, 42)
    assert parse_file_name("a+b+1+2.json") == ParsedFileName("a+b", 1, 2)
    for bad in ("actor.json", "actor+1.json", "actor+1+x.json", "actor+1+2.json.gz", "actor+1+2.keys.avro",
                "actor+1+2.keys.parquet", "actor+1+2.headers.snappy.parquet", "actor+1+2.lz4.parquet",
                "actor+1+2.avro.gz"):
        assert parse_file_name(bad) is None


@pytest.mark.parametrize(("name", "kind", "codec"), [
    ("a+0+7.avro", "avro", None),
    ("a+0+7.parquet", "parquet", ""),
    ("a+0+7.snappy.parquet", "parquet", ".snappy"),
    ("a+0+7.gz.parquet", "parquet", ".gz"),
    ("a+0+7.zstd.parquet", "parquet", ".zstd"),
    ("a+0+7.br.parquet", "parquet", ".br"),
])
def test_sink_format_names(name, kind, codec):
    assert parse_file_name(name) == ParsedFileName("a", 0, 7, kind, codec)


def test_primary_keys_from_sources_yml(tmp_path: Path):
    path = tmp_path / "sources.yml"
    path.write_text(
        """
sources:
  - name: bronze
    tables:
      - {name: pagila_public_actor, meta: {topic: pagila.public.actor, primary_key: [actor_id]}}
      - {name: pagila_public_film_actor, meta: {primary_key: [actor_id, film_id]}}
      - {name: no_meta}
  - name: elsewhere
    tables:
      - {name: t, meta: {topic: other.topic, primary_key: id}}
"""
    )
    keys = load_primary_keys(path)
    assert keys.lookup("pagila.public.actor", "pagila_public_actor") == ["actor_id"]
    assert keys.lookup("pagila.public.film_actor", "pagila_public_film_actor") == ["actor_id", "film_id"]
    assert keys.lookup("other.topic", "other_topic") is None


def test_missing_sources_yml_only_warns(tmp_path: Path, caplog):
    keys = load_primary_keys(tmp_path / "missing.yml")
    assert keys.lookup("any", "any") is None
    assert "not found" in caplog.text


def test_bad_primary_key_declaration(tmp_path: Path):
    path = tmp_path / "sources.yml"
    path.write_text("sources: [{name: bronze, tables: [{name: t, meta: {primary_key: [1]}}]}]")
    with pytest.raises(SourcesFileError, match="meta.primary_key"):
        load_primary_keys(path)


def test_query_based_declaration(tmp_path: Path):
    path = tmp_path / "sources.yml"
    path.write_text(
        """
sources:
  - name: bronze
    tables:
      - {name: q_products, meta: {topic: q.products, primary_key: [id], query_based: {updated_at: changed_at}}}
      - {name: pagila_public_actor, meta: {topic: pagila.public.actor, primary_key: [actor_id]}}
"""
    )
    keys = load_primary_keys(path)
    assert keys.updated_at("q.products", "q_products") == "changed_at"
    assert keys.updated_at("other", "q_products") == "changed_at"
    assert keys.updated_at("pagila.public.actor", "pagila_public_actor") is None


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ("{primary_key: [id], query_based: changed_at}", "must be a mapping with one entry"),
        ("{primary_key: [id], query_based: {updated_at: changed_at, mode: x}}", "must be a mapping with one entry"),
        ("{primary_key: [id], query_based: {updated_at: 'a; drop table x'}}", "is not a plain column name"),
        ("{primary_key: [id], query_based: {updated_at: id}}", "is a primary key column"),
        ("{query_based: {updated_at: changed_at}}", "needs meta.primary_key"),
    ],
)
def test_bad_query_based_declaration(tmp_path: Path, meta: str, message: str):
    path = tmp_path / "sources.yml"
    path.write_text(f"sources: [{{name: bronze, tables: [{{name: t, meta: {meta}}}]}}]")
    with pytest.raises(SourcesFileError, match=f"table 't': .*{message}"):
        load_primary_keys(path)
