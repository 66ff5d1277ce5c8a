"""What `xrgw validate -c` checks beyond the config file itself, as problems anchored at
the endpoint's place in the config (FILE:LINE:COL):

- every endpoint's adapter is built as `run` builds it (options, TLS files, NATS creds
  and NKey seed files read and parsed), so `validate` accepts only what `run` accepts;
- `--connect`: each endpoint reached as `run` would reach it (DNS, TCP, TLS with the
  days its certificate has left, login, the topic or stream), by the adapter factory's
  `preflight` (adapters/_preflight.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gateway.config import GatewayConfig, for_adapter
from gateway.config._yaml import locate, read_yaml
from gateway.daemon import AdapterFactory
from gateway.ports import AdapterEndpoint
from gateway.spec.problems import Problem, Severity, json_path


class Finding(Protocol):
    """One result of a preflight step (adapters/_preflight.Finding)."""

    @property
    def step(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def fix(self) -> str: ...


class Prober(Protocol):
    async def preflight(self, endpoint: AdapterEndpoint, *, source: bool,
                        timeout: float = 5.0) -> Sequence[Finding]: ...


@dataclass(frozen=True)
class Checked:
    """One endpoint's preflight result, for the text and JSON reports."""

    endpoint: str
    problem: Problem | None  # the anchor (severity of the worst finding), None when all ok
    path: str
    line: int | None
    column: int | None
    findings: Sequence[Finding]

    def to_json(self, file: str) -> dict[str, object]:
        return {"file": file, "line": self.line, "column": self.column, "path": self.path,
                "endpoint": self.endpoint,
                "result": "ok" if self.problem is None else self.problem.severity,
                "steps": [{"step": f.step, "result": f.outcome, "message": f.message,
                           **({"fix": f.fix} if f.fix else {})} for f in self.findings]}


def endpoint_path(config: GatewayConfig, endpoint: str, overridden: set[str]) -> str:
    """Where an endpoint is named in the config: its override, else its first use."""
    if endpoint in overridden:
        return json_path("endpoints", endpoint)
    for index, route in enumerate(config.routes):
        if route.source == endpoint:
            return json_path("routes", index, "from")
        if endpoint in route.targets:
            return json_path("routes", index, "to", route.targets.index(endpoint))
    if config.deadletter == endpoint:
        return json_path("deadletter")
    return json_path("endpoints", endpoint)


def _overridden(file: str) -> set[str]:
    try:
        doc = read_yaml(Path(file).read_text(encoding="utf-8"), file)
    except OSError:
        return set()
    endpoints = doc.data.get("endpoints") if isinstance(doc.data, dict) else None
    return {str(k) for k in endpoints} if isinstance(endpoints, dict) else set()


def _sources(config: GatewayConfig) -> set[str]:
    return {route.source for route in config.routes}


def build_problems(config: GatewayConfig, factory: AdapterFactory) -> list[Problem]:
    """Build every endpoint's adapter as `run` does (nothing connects): what `run` would
    refuse at start-up, with file and line."""
    overridden = _overridden(config.file)
    problems = []
    for route in config.routes:
        used = [(route.source, True), *((t, False) for t in route.targets)]
        for endpoint_id, source in used:
            endpoint = config.endpoints[endpoint_id]
            try:
                if source:
                    factory.consumer(for_adapter(endpoint, route.messages),
                                     observe=route.observe)
                else:
                    factory.producer(for_adapter(endpoint))
            except ValueError as exc:
                problems.append(Problem(
                    "error", config.file, endpoint_path(config, endpoint_id, overridden),
                    f"endpoint '{endpoint_id}': {exc}",
                    "fix the endpoint's options or files; `xrgw run` refuses it as well"))
    if config.deadletter is not None:
        try:
            factory.producer(for_adapter(config.endpoints[config.deadletter]))
        except ValueError as exc:
            problems.append(Problem(
                "error", config.file, endpoint_path(config, config.deadletter, overridden),
                f"endpoint '{config.deadletter}': {exc}", "fix the endpoint's options"))
    return _located(config.file, _unique(problems))


def _unique(problems: list[Problem]) -> list[Problem]:
    seen: dict[tuple[str, str], Problem] = {}
    for problem in problems:
        seen.setdefault((problem.path, problem.message), problem)
    return list(seen.values())


def _located(file: str, problems: list[Problem]) -> list[Problem]:
    try:
        doc = read_yaml(Path(file).read_text(encoding="utf-8"), file)
    except OSError:
        return problems
    return locate(problems, doc, file)


async def _connect_all(config: GatewayConfig, prober: Prober,
                       timeout: float) -> list[tuple[str, Sequence[Finding]]]:
    sources = _sources(config)
    ids = sorted(config.endpoints)

    async def one(endpoint_id: str) -> Sequence[Finding]:
        return await prober.preflight(for_adapter(config.endpoints[endpoint_id]),
                                      source=endpoint_id in sources, timeout=timeout)

    results = await asyncio.gather(*(one(e) for e in ids))
    return list(zip(ids, results, strict=True))


def connect_checks(config: GatewayConfig, prober: Prober,
                   timeout: float = 5.0) -> list[Checked]:
    """`validate --connect`: every endpoint reached, one `Checked` per endpoint."""
    overridden = _overridden(config.file)
    results = asyncio.run(_connect_all(config, prober, timeout))
    checked = []
    for endpoint_id, findings in results:
        path = endpoint_path(config, endpoint_id, overridden)
        bad = [f for f in findings if f.outcome != "ok"]
        problem = None
        if bad:
            severity: Severity = ("error" if any(f.outcome == "error" for f in bad)
                                  else "warning")
            first = next(f for f in bad if f.outcome == severity)
            problem = Problem(severity, config.file, path,
                              f"endpoint '{endpoint_id}': {first.step}: {first.message}",
                              first.fix)
        anchor = _located(config.file, [problem or Problem("warning", config.file, path,
                                                           "")])[0]
        checked.append(Checked(endpoint_id, anchor if problem else None, path, anchor.line,
                               anchor.column, findings))
    return checked


def connect_line(file: str, checked: Checked) -> str:
    """The text form of an endpoint that passed: `FILE:LINE:COL: ok: endpoint 'x': ...`."""
    where = file if checked.line is None else f"{file}:{checked.line}:{checked.column}"
    steps = "; ".join(f"{f.step} {f.message}" for f in checked.findings)
    return f"{where}: ok: endpoint '{checked.endpoint}': {steps}"


__all__ = ["Checked", "Prober", "build_problems", "connect_checks", "connect_line",
           "endpoint_path"]
