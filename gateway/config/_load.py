"""`load_config`: config file -> (GatewayConfig | None, problems). Never raises on bad input.

Stages, each collecting every problem it finds before the next one runs:
  1. YAML (syntax, duplicate keys)         `_yaml.py`
  2. `${VAR}` substitution                  `_env.py`
  3. keys, types and values against spec    `gateway/spec/parse.py` + `_schema.py`
  4. definitions loaded, routes checked     `gateway.definitions` + `_routes.py`
  5. endpoints resolved (addresses, files)  `_endpoints.py`
A stage runs only when the previous one had no errors: checking routes against a
half-parsed config would produce follow-on problems that hide the real one.

`check_environment=False` (`xrgw validate --no-env`) checks the config as written, away
from the machine it is meant for: no `${VAR}` is read (defaults are used; a reference
without one is left as written and its value is not type-, value- or reference-checked),
secret files are not read and the existence of TLS, CA and credential files is not
checked. Everything else is checked as always. Such a config is for reporting only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from gateway.config._endpoints import EndpointResolver
from gateway.config._env import Substitution
from gateway.config._insecure import insecure_settings
from gateway.config._model import (
    AdminConfig,
    DefinitionSource,
    EndpointConfig,
    GatewayConfig,
    LogConfig,
    LogFormat,
    LogLevel,
    RouteConfig,
    ShutdownConfig,
)
from gateway.config._routes import RouteChecker, observe_all
from gateway.config._schema import CONFIG_SPEC, DEADLETTER_LOG, split_hostport
from gateway.config._yaml import locate, read_yaml
from gateway.definitions import load_catalog
from gateway.definitions.model import Catalog
from gateway.policies.readiness import ReadinessPolicy
from gateway.ports.netaddr import is_loopback
from gateway.schemas.fetch import FETCHER, FetchPolicy
from gateway.spec.parse import INVALID, Context, holds_unresolved, parse
from gateway.spec.problems import Problem, Problems, json_path
from gateway.spec.secret import Secret

Raw = dict[str, object]


def load_config(
    path: str | Path, *, environ: Mapping[str, str] | None = None,
    check_environment: bool = True, observe: bool = False,
) -> tuple[GatewayConfig | None, list[Problem]]:
    """Load and check a config file; `environ` replaces `os.environ` (tests); `observe`
    (`run`/`validate --observe`) puts every route in shadow mode, refusing the config
    when a route's source cannot be observed."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, [Problem("error", file, "$", f"cannot read the config file: {reason}",
                              "check the path given with -c and the file's permissions")]
    return load_config_text(text, file, Path(path).parent, environ=environ,
                            check_environment=check_environment, observe=observe)


def load_config_text(
    text: str, file: str, base_dir: Path, *, environ: Mapping[str, str] | None = None,
    check_environment: bool = True, observe: bool = False,
) -> tuple[GatewayConfig | None, list[Problem]]:
    """The same from a string; relative paths in it are resolved against `base_dir`."""
    doc = read_yaml(text, file)
    problems = Problems(list(doc.problems))
    config = (_load(doc.data, file, base_dir, environ, check_environment, problems)
              if not problems.errors else None)
    if config is not None and observe:
        config, refused = observe_all(config)
        problems.extend(refused)
        config = None if refused else config
    return config, locate(problems.items, doc, file)


def _load(
    data: object, file: str, base_dir: Path, environ: Mapping[str, str] | None,
    check_environment: bool, problems: Problems,
) -> GatewayConfig | None:
    if not isinstance(data, dict):
        got = "empty" if data is None else "not a mapping"
        problems.error(file, "$", f"the config is {got}",
                       "write a mapping with at least definitions, routes and deadletter")
        return None
    substitution = Substitution(file, environ, read_environment=check_environment)
    data = substitution.apply(data)
    problems.extend(substitution.problems)
    ctx = Context(file, problems, substitution.substituted, substitution.unresolved)
    parsed = parse(CONFIG_SPEC, data, (), ctx)
    if parsed is INVALID or problems.errors:
        return None
    env = _Environment(check_environment, substitution.unresolved)
    return _check(cast(Raw, parsed), file, base_dir, env, problems)


class _Environment:
    """How much of the machine a load looks at: all of it, or (`--no-env`) nothing, with
    the paths of the `${NAME}`s left unread."""

    def __init__(self, checked: bool, unresolved: set[str]) -> None:
        self.checked = checked
        self.unresolved = unresolved

    def holds_unresolved(self, *parts: str | int) -> bool:
        return holds_unresolved(self.unresolved, json_path(*parts))


def _check(raw: Raw, file: str, base_dir: Path, env: _Environment,
           problems: Problems) -> GatewayConfig | None:
    sources, skipped = _sources(cast(list[object], raw["definitions"]), file, base_dir, env,
                                problems)
    catalog = load_catalog([s.location for s in sources],
                           access={s.location: s.access() for s in sources if s.is_registry})
    problems.extend(catalog.problems)
    unread = skipped or any(p.is_error and p.path == "$" for p in catalog.problems)
    FETCHER.configure(_fetch_policy(cast(Raw, raw["schema_fetch"])))
    checker = RouteChecker(catalog, file, problems, unread_sources=unread,
                           unresolved=env.unresolved)
    checker.overrides = cast(dict[str, object] | None, raw["endpoints"]) or {}
    raw_routes = cast(list[Raw], raw["routes"])
    routes = [checker.route(i, r) for i, r in enumerate(raw_routes)]
    deadletter = cast(str, raw["deadletter"])
    if deadletter != DEADLETTER_LOG:
        checker.deadletter(deadletter)
    endpoints = _endpoints(cast(dict[str, Raw] | None, raw["endpoints"]) or {}, checker.used,
                           catalog, file, base_dir, env, problems, unread)
    admin = _admin(cast(Raw, raw["admin"]), file, base_dir, env, problems)
    for where, message, fix in insecure_settings(endpoints):
        problems.warning(file, where, message, fix)
    if problems.errors:
        return None
    return GatewayConfig(
        file=file,
        definitions=tuple(sources),
        routes=tuple(r for r in routes if isinstance(r, RouteConfig)),
        deadletter=None if deadletter == DEADLETTER_LOG else deadletter,
        admin=admin,
        log=LogConfig(cast(LogLevel, cast(Raw, raw["log"])["level"]),
                      cast(LogFormat, cast(Raw, raw["log"])["format"])),
        shutdown=ShutdownConfig(cast(float, cast(Raw, raw["shutdown"])["grace"])),
        endpoints=endpoints,
        catalog=catalog,
    )


#: How often a registry given as a plain URL is polled (the mapping form's default).
_REGISTRY_POLL = 30.0


def _sources(
    items: list[object], file: str, base_dir: Path, env: _Environment, problems: Problems
) -> tuple[list[DefinitionSource], bool]:
    """The sources to load, and whether any was left out (`--no-env`: it names a
    variable not read, or a CA file not on this machine)."""
    out: list[DefinitionSource] = []
    skipped = False
    for i, item in enumerate(items):
        if env.holds_unresolved("definitions", i):
            skipped = True
            problems.warning(file, json_path("definitions", i),
                             "not loaded: the source names an environment variable, which "
                             "--no-env does not read; routes are not checked against it",
                             "check with the environment: xrgw validate -c without --no-env")
            continue
        if isinstance(item, str) and item.strip().lower().startswith(("http://", "https://")):
            # A registry written as a plain URL (what one writes first): polled with the
            # defaults of the mapping form, which also takes headers and ca_file.
            out.append(DefinitionSource(item.strip(), _REGISTRY_POLL))
            continue
        if isinstance(item, str):
            path = Path(item).expanduser()
            out.append(DefinitionSource(str(path if path.is_absolute() else base_dir / path)))
            continue
        entry = cast(Raw, item)
        headers = cast(dict[str, Secret] | None, entry["headers"]) or {}
        ca_file = cast(str | None, entry.get("ca_file"))
        if ca_file is not None:
            path = Path(ca_file).expanduser()
            ca_file = str(path if path.is_absolute() else base_dir / path)
            if not Path(ca_file).is_file() and not env.checked:
                # The registry cannot be verified without its CA; not loading it is the
                # honest outcome, and the file's absence is the environment's business.
                skipped = True
                problems.warning(file, json_path("definitions", i),
                                 f"not loaded: its ca_file '{ca_file}' is not on this machine, "
                                 "and --no-env does not require it",
                                 "check with the environment: xrgw validate -c without "
                                 "--no-env")
                continue
            if not Path(ca_file).is_file():
                problems.error(file, json_path("definitions", i, "ca_file"),
                               f"file '{ca_file}' does not exist",
                               "correct the path (relative paths start at the config file's "
                               "directory)")
        out.append(DefinitionSource(cast(str, entry["url"]), cast(float, entry["poll"]), headers,
                                    ca_file))
    return out, skipped


def _endpoints(
    overrides: dict[str, Raw], used: dict[str, str], catalog: Catalog, file: str,
    base_dir: Path, env: _Environment, problems: Problems, unread_sources: bool = False,
) -> dict[str, EndpointConfig]:
    resolver = EndpointResolver(catalog, file, base_dir, problems,
                                check_environment=env.checked, unresolved=env.unresolved)
    if not unread_sources:  # else the unread source is the root cause, reported once
        resolver.check_ids(overrides)
    out: dict[str, EndpointConfig] = {}
    for eid, used_at in used.items():
        out[eid] = resolver.resolve(eid, overrides.get(eid), used_at)
    for eid, override in overrides.items():
        if eid in catalog.endpoints and eid not in out:
            problems.warning(file, json_path("endpoints", eid),
                             f"endpoint '{eid}' is not used by any route or as dead letter",
                             "remove the override, or use the endpoint in a route")
            out[eid] = resolver.resolve(eid, override, json_path("endpoints", eid))
    return out


def _fetch_policy(raw: Raw) -> FetchPolicy:
    proxy = raw.get("proxy")
    return FetchPolicy(allow=tuple(cast(list[str], raw.get("allow") or [])),
                       proxy=proxy if isinstance(proxy, str) and proxy else None,
                       timeout=cast(float, raw["timeout"]))


def _admin(raw: Raw, file: str, base_dir: Path, env: _Environment,
           problems: Problems) -> AdminConfig:
    hostport = split_hostport(cast(str, raw["listen"])) or ("127.0.0.1", 9464)
    health = raw.get("health_listen")
    pages_listen = split_hostport(cast(str, raw["pages_listen"])) or ("127.0.0.1", 9466)
    admin = AdminConfig(*hostport, health=split_hostport(health) if isinstance(health, str)
                        else None,
                        readiness=cast(ReadinessPolicy, raw.get("readiness") or "all"),
                        pages=cast(str, raw["pages"]), pages_listen=pages_listen,
                        token=_admin_token(raw.get("token_file"), file, base_dir, env,
                                           problems))
    where = admin.pages_address()
    exposed = (admin.host if where == "listen" else where[0] if where is not None else
               "127.0.0.1")
    if not is_loopback(exposed) and admin.token is None and raw.get("token_file") is None:
        problems.warning(file, json_path("admin", "pages"),
                         f"the pages with message samples (/conformance, /) are served on "
                         f"{exposed}, off loopback, without a token",
                         "set admin.token_file, or keep the pages on loopback "
                         "(admin.pages: auto)")
    return admin


def _admin_token(name: object, file: str, base_dir: Path, env: _Environment,
                 problems: Problems) -> Secret | None:
    """The pages' bearer token from `admin.token_file` (None: none, or not read under
    `--no-env`)."""
    if not isinstance(name, str) or not env.checked:
        return None
    path = Path(name) if Path(name).is_absolute() else base_dir / name
    where = json_path("admin", "token_file")
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
        problems.error(file, where, f"cannot read the admin token file '{path}': {reason}",
                       "create the file or correct the path (relative paths start at the "
                       "config file's directory)")
        return None
    if not token:
        problems.error(file, where, f"admin token file '{path}' is empty",
                       "write the token into the file")
        return None
    return Secret(token)
