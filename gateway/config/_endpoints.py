"""Resolving endpoints: a definition from the catalog plus its `endpoints.<id>` override ->
`EndpointConfig` with final address, credentials, TLS files and merged options.

This is the one place that reads files named by the config (secrets, TLS material): a
missing file should fail `xrgw validate`, not the first connect an hour later. Unless the
environment is not checked (`xrgw validate --no-env`): then no file is read or required,
and a value holding an unread `${NAME}` is not checked (its address, its option value).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from gateway.config._addresses import check_uri, definition_addresses, server_list
from gateway.config._model import EndpointConfig
from gateway.definitions.checks import where
from gateway.definitions.model import Catalog, Endpoint
from gateway.json.values import JSON, JSONObject
from gateway.ports import TlsSettings
from gateway.ports.adapter_options import has_adapters, option_spec
from gateway.ports.options import COMMON_OPTIONS, Option, OptionSpec
from gateway.protocols import PROTOCOLS
from gateway.spec.parse import holds_unresolved
from gateway.spec.problems import Problem, Problems, json_path, suggest
from gateway.spec.secret import Secret

Override = Mapping[str, object]


# Options naming files (credentials read by the client library): resolved against the
# config file's directory and checked to exist, like the tls files.
FILE_OPTIONS = ("creds_file", "nkey_seed_file")


class EndpointResolver:
    def __init__(self, catalog: Catalog, file: str, base_dir: Path, problems: Problems, *,
                 check_environment: bool = True, unresolved: set[str] | None = None) -> None:
        self.catalog = catalog
        self.file = file
        self.base_dir = base_dir
        self.problems = problems
        self.check_environment = check_environment
        self.unresolved = unresolved or set()

    def check_ids(self, overrides: Mapping[str, Override]) -> None:
        known = sorted(self.catalog.endpoints)
        for endpoint_id in overrides:
            if endpoint_id not in self.catalog.endpoints:
                close = suggest(endpoint_id, known)
                fix = (f"did you mean '{close}'?" if close else
                       f"use an endpoint id of the definitions: {', '.join(known) or '(none)'}")
                self.problems.error(self.file, json_path("endpoints", endpoint_id),
                                    f"no endpoint '{endpoint_id}' in the definitions", fix)

    def resolve(self, endpoint_id: str, override: Override | None, used_at: str) -> EndpointConfig:
        """`used_at` is the JSON path that made the endpoint needed (for address problems)."""
        endpoint = self.catalog.endpoints[endpoint_id]
        over: Override = override or {}
        self._check_adapter(endpoint, used_at)
        uris, bootstrap = self._addresses(endpoint, over, used_at)
        tls = self._tls(endpoint_id, over.get("tls"))
        return EndpointConfig(
            endpoint_id=endpoint_id,
            protocol=endpoint.protocol,
            usage=endpoint.usage,
            uris=uris,
            bootstrap_servers=bootstrap,
            username=self._credential(endpoint_id, over, "username"),
            password=self._password(endpoint_id, over),
            client_id=_str(over.get("client_id")),
            tls=tls,
            options=self._files(endpoint_id, self._options(endpoint, over.get("options"))),
            envelope_options=dict(endpoint.envelope_options),
            messages=tuple(self.catalog.messages_for_endpoint(endpoint_id)),
            definition=endpoint,
        )

    def _check_adapter(self, endpoint: Endpoint, used_at: str) -> None:
        """`run` needs an adapter for every endpoint it uses; say so here, not at start."""
        if option_spec(endpoint.protocol) is not None or not has_adapters():
            return
        served = [p for p in PROTOCOLS if option_spec(p) is not None]
        close = suggest(endpoint.protocol or "", served)
        at = where(endpoint.field_provenance, endpoint.provenance, "protocol")
        self.problems.error(
            self.file, used_at,
            f"endpoint '{endpoint.endpoint_id}' has protocol '{endpoint.protocol}', which no "
            f"adapter serves ({at.file}: {at.path})",
            (f"did you mean '{close}'? " if close else "") +
            f"use one of: {', '.join(served)}")

    def _addresses(
        self, endpoint: Endpoint, over: Override, used_at: str
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        eid = endpoint.endpoint_id
        uri = _str(over.get("uri"))
        if uri is not None and json_path("endpoints", eid, "uri") in self.unresolved:
            return (uri,), ()  # an address still to come from the environment
        if uri is not None:
            issue = check_uri(uri, endpoint.protocol)
            if issue is not None:
                self.problems.error(self.file, json_path("endpoints", eid, "uri"), *issue)
            servers = server_list(uri, endpoint.protocol)
            return (uri,), servers
        fix = f"add the address to the config: endpoints: {{{eid}: {{uri: ...}}}}"
        if not endpoint.deployed:
            self.problems.error(
                self.file, used_at,
                f"endpoint '{eid}' is a template (deployed: false) and needs an address", fix)
            return (), ()
        uris, bootstrap = definition_addresses(endpoint)
        if not uris:
            self.problems.error(
                self.file, used_at,
                f"endpoint '{eid}' has no address (no protocoloptions.endpoints in "
                f"{endpoint.provenance.file})", fix)
        return uris, bootstrap

    def _credential(self, eid: str, over: Override, key: str) -> str | None:
        value = over.get(key)
        if isinstance(value, Secret):
            return value.reveal()
        if isinstance(value, str):
            return value
        name = _str(over.get(f"{key}_file"))
        if name is None or not self.check_environment:
            return None  # a secret file is the machine's: --no-env does not read it
        return self._read_secret(eid, f"{key}_file", name)

    def _password(self, eid: str, over: Override) -> Secret | None:
        value = self._credential(eid, over, "password")
        return None if value is None else Secret(value)

    def _read_secret(self, eid: str, key: str, name: str) -> str | None:
        path = self._path(name)
        where = json_path("endpoints", eid, key)
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
            self.problems.error(self.file, where, f"cannot read secret file '{path}': {reason}",
                                "create the file or correct the path (relative paths start "
                                "at the config file's directory)")
            return None
        if not text:
            self.problems.error(self.file, where, f"secret file '{path}' is empty",
                                "write the secret into the file")
            return None
        return text

    def _tls(self, eid: str, raw: object) -> TlsSettings | None:
        if not isinstance(raw, Mapping):
            return None
        files: dict[str, str | None] = {}
        for key in ("ca_file", "cert_file", "key_file"):
            name = _str(raw.get(key))
            files[key] = None if name is None else str(self._path(name))
            if name is not None and self.check_environment and not self._path(name).is_file():
                self.problems.error(self.file, json_path("endpoints", eid, "tls", key),
                                    f"file '{self._path(name)}' does not exist",
                                    "correct the path (relative paths start at the config "
                                    "file's directory)")
        return TlsSettings(files["ca_file"], files["cert_file"], files["key_file"],
                           raw.get("insecure") is True)

    def _files(self, eid: str, options: dict[str, JSON]) -> dict[str, JSON]:
        for key in FILE_OPTIONS:
            name = options.get(key)
            if not isinstance(name, str):
                continue
            path = self._path(name)
            options[key] = str(path)
            if self.check_environment and not path.is_file():
                self.problems.error(self.file, json_path("endpoints", eid, "options", key),
                                    f"file '{path}' does not exist",
                                    "correct the path (relative paths start at the config "
                                    "file's directory)")
        return options

    def _options(self, endpoint: Endpoint, raw: object) -> dict[str, JSON]:
        """The adapter's options: the document's protocoloptions overlaid by the config's
        `endpoints.<id>.options`, each checked against the adapter's option spec and keyed
        by its canonical name."""
        eid = endpoint.endpoint_id
        document = {k: v for k, v in endpoint.protocol_options.items()
                    if k not in COMMON_OPTIONS}
        override = raw if isinstance(raw, Mapping) else {}
        spec = option_spec(endpoint.protocol)
        if spec is None:
            merged: JSONObject = dict(document)
            for key, value in override.items():
                merged[str(key)] = _merge(merged.get(str(key)), value)
            return merged
        values = self._document_options(endpoint, spec, document)
        # An option the adapter knows whose value is an unread `${NAME}` is passed on
        # unchecked; its name is still checked with the others.
        unread = {str(k): v for k, v in override.items()
                  if _settable(spec, str(k))
                  and holds_unresolved(self.unresolved,
                                       json_path("endpoints", eid, "options", str(k)))}
        configured = spec.validate({k: v for k, v in override.items() if str(k) not in unread},
                                   "config", self.file, ("endpoints", eid, "options"),
                                   self.problems)
        configured.update(spec.canonical(unread))
        for name, value in configured.items():
            values[name] = _merge(values.get(name), value)
        return values

    def _document_options(self, endpoint: Endpoint, spec: OptionSpec,
                          document: Mapping[str, JSON]) -> dict[str, JSON]:
        """The document's options, problems reported where the document wrote them. Unknown
        names are left out quietly: the definitions check has warned about them already."""
        values: dict[str, object] = {}
        for name, value in document.items():
            if spec.lookup(name) is None:
                continue
            found = Problems()
            values.update(spec.validate({name: value}, "definitions", "", (), found))
            # Checked one option at a time, so each problem's path is the option's own
            # (plus any nested part), moved to where the document wrote the option.
            at = where(endpoint.field_provenance, endpoint.provenance, "protocoloptions", name)
            own = json_path(name)
            self.problems.extend(
                Problem(p.severity, at.file, at.path + p.path[len(own):], p.message, p.fix)
                for p in found)
        return cast(dict[str, JSON], values)

    def _path(self, name: str) -> Path:
        path = Path(name).expanduser()
        return path if path.is_absolute() else self.base_dir / path


def _settable(spec: OptionSpec, name: str) -> bool:
    """Whether `name` is an option an operator may set (not unsupported, not derived)."""
    entry = spec.lookup(name)
    return isinstance(entry, Option) and not entry.derived


def _merge(base: JSON | None, over: object) -> JSON:
    """Deep merge of mappings (override wins); anything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[str(key)] = _merge(out.get(str(key)), value)
        return out
    return cast(JSON, over)  # parsed YAML is JSON-like


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
