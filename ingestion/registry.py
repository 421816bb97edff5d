"""A schema registry client: Avro writer schemas by id through the Confluent-compatible API.

`GET <url>/schemas/ids/<id>` answers `{"schema": "<schema JSON>", ...}` on Confluent
Schema Registry and on Apicurio Registry's `/apis/ccompat/v7`. Each id is fetched once
per client (schemas under an id never change).

| variable | meaning |
| --- | --- |
| ``CDC_SCHEMA_REGISTRY_URL`` | base URL of the Confluent-compatible API, e.g. ``http://host:8081`` or ``http://host:8080/apis/ccompat/v7`` |
| ``CDC_SCHEMA_REGISTRY_USER`` / ``CDC_SCHEMA_REGISTRY_PASSWORD`` | optional HTTP basic-auth credentials |
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from ingestion.errors import RegistryUnavailableError, SchemaRegistryError, UnknownSchemaError, UsageError

URL_ENV = "CDC_SCHEMA_REGISTRY_URL"
USER_ENV = "CDC_SCHEMA_REGISTRY_USER"
PASSWORD_ENV = "CDC_SCHEMA_REGISTRY_PASSWORD"
# Answers worth asking again: the registry is starting, overloaded or behind a proxy
# that lost its upstream for a moment.
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass
class SchemaRegistryClient:
    url: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 10.0
    attempts: int = 4  # the first try and three retries, 0.5 s, 1 s, 2 s apart
    _cache: dict[int, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.strip().rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise UsageError(f"schema registry URL {self.url!r} must start with http:// or https:// ({URL_ENV})")
        if bool(self.user) != bool(self.password):
            raise UsageError(f"set both {USER_ENV} and {PASSWORD_ENV}, or neither")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "SchemaRegistryClient":
        environ = dict(os.environ) if environ is None else environ
        url = environ.get(URL_ENV, "").strip()
        if not url:
            raise UsageError(f"--value-format avro needs the schema registry's URL in {URL_ENV}")
        return cls(url, environ.get(USER_ENV) or None, environ.get(PASSWORD_ENV) or None)

    def _request(self, path: str) -> urllib.request.Request:
        request = urllib.request.Request(self.url + path, headers={"Accept": "application/json"})
        if self.user:
            token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode("ascii")
            request.add_header("Authorization", f"Basic {token}")
        return request

    def get_json(self, path: str, not_found: str) -> object:
        """The JSON answer to `GET <url><path>`, asked again on transient errors; raises
        UnknownSchemaError (404: `not_found` says what is missing), RegistryUnavailableError
        (no answer after retries) or SchemaRegistryError (refused credentials, another
        error, an answer that is not JSON)."""
        where = f"{self.url}{path}"
        problem = ""
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(0.5 * 2 ** (attempt - 1))
            try:
                with urllib.request.urlopen(self._request(path), timeout=self.timeout) as answer:
                    body = answer.read()
                break
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    raise UnknownSchemaError(f"{not_found} (GET {where}: 404)") from None
                if exc.code in (401, 403):
                    raise SchemaRegistryError(
                        f"the registry refused GET {where} ({exc.code}): check {USER_ENV} / {PASSWORD_ENV}") from None
                if exc.code not in TRANSIENT_STATUS:
                    raise SchemaRegistryError(f"GET {where} answered {exc.code} {exc.reason}") from None
                problem = f"{exc.code} {exc.reason}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                problem = str(getattr(exc, "reason", exc))
        else:
            raise RegistryUnavailableError(
                f"schema registry unreachable: GET {where} failed {self.attempts} times, last: {problem}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise SchemaRegistryError(f"GET {where} answered something that is not JSON: {exc}") from None

    def schema(self, schema_id: int) -> str:
        """The writer schema (JSON text) registered under `schema_id`; raises
        UnknownSchemaError (404), RegistryUnavailableError (no answer after retries) or
        SchemaRegistryError (refused credentials, not Avro, an answer that is no schema)."""
        if schema_id in self._cache:
            return self._cache[schema_id]
        path = f"/schemas/ids/{schema_id}"
        document = self.get_json(path, f"the registry has no schema with id {schema_id}")
        self._cache[schema_id] = _avro_schema(document, f"schema id {schema_id}", f"{self.url}{path}")
        return self._cache[schema_id]

    def subjects(self) -> list[str]:
        """Every subject the registry holds (`GET /subjects`)."""
        document = self.get_json("/subjects", "the registry answers no subject list")
        if not isinstance(document, list) or not all(isinstance(s, str) for s in document):
            raise SchemaRegistryError(f"GET {self.url}/subjects answered something that is not a list of subjects")
        return document

    def latest_schema(self, subject: str) -> str:
        """The Avro schema (JSON text) of the latest version of `subject`
        (`GET /subjects/<subject>/versions/latest`)."""
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest"
        document = self.get_json(path, f"the registry has no subject {subject!r}")
        return _avro_schema(document, f"subject {subject!r}", f"{self.url}{path}")


def _avro_schema(document: object, what: str, where: str) -> str:
    """The schema text of a registry answer `{"schema": "<JSON>", "schemaType": ...}`, Avro only."""
    try:
        text = document["schema"]  # type: ignore[index]
        json.loads(text)
    except (ValueError, KeyError, TypeError) as exc:
        raise SchemaRegistryError(f"GET {where} answered something that is not a schema: {exc}") from None
    kind = document.get("schemaType") or "AVRO"  # type: ignore[union-attr]
    if kind != "AVRO":
        raise SchemaRegistryError(f"{what} is {kind}, not Avro (GET {where}); only Avro is read")
    return text
