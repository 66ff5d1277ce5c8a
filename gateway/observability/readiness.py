"""What `/readyz` answers: one small function of the endpoints' states, the routes'
states and the configured policy (`admin.readiness`).

Readiness decides whether a pod gets traffic from its Service; liveness (`/healthz`) stays
about the process. What should take a pod out of rotation depends on where it runs:

- `all`: every endpoint of every route is connected (its source, its outputs and the
  dead-letter endpoint) and every route is running. A bridge behind a Service: a replica
  that cannot deliver steps aside.
- `sources`: every route's source is connected (an HTTP ingress listening, a
  subscription up) and every route is running; an output that is down holds messages at
  the source (the HTTP ingress answers 503 + Retry-After) without taking the pod out.
- `none`: ready once the gateway has started; endpoint and route states are still listed
  in the body and in `xrgw_endpoint_connected`, but never fail the probe. A sidecar: the
  application pod must not leave its Service because a remote broker blinked.

Route states come from the routes (`running`, or a stuck state such as `stalled` /
`held` with its cause); any state other than `running` counts against readiness under
`all` and `sources`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from gateway.json.values import JSON
from gateway.policies.readiness import ReadinessPolicy

EndpointRole = Literal["source", "output", "deadletter"]

#: A route's state when nothing is wrong with it.
RUNNING = "running"


@dataclass(frozen=True)
class EndpointState:
    """One endpoint as one route uses it."""

    endpoint: str
    route: str
    role: EndpointRole
    connected: bool


@dataclass(frozen=True)
class RouteState:
    route: str
    state: str = RUNNING
    why: str | None = None  # the cause of a state other than running
    # what the route reports about its state (a stall: cause, endpoint, seconds)
    details: tuple[dict[str, JSON], ...] = ()


@dataclass(frozen=True)
class Readiness:
    ready: bool
    policy: ReadinessPolicy
    # route -> every endpoint of the route connected (the body's `routes`, kept as it was)
    routes: dict[str, bool] = field(default_factory=dict)
    # what counts against readiness under the policy, each with why
    not_ready: list[dict[str, JSON]] = field(default_factory=list)
    # what is down but does not count under the policy
    ignored: list[dict[str, JSON]] = field(default_factory=list)
    # route -> the details of its state, for the routes not running (e.g. their stalls)
    stalled: dict[str, list[JSON]] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        return {"ready": self.ready, "policy": self.policy,
                "routes": dict(self.routes),
                "not_ready": list(self.not_ready),
                "ignored": list(self.ignored),
                "stalled": {k: list(v) for k, v in self.stalled.items()}}


def _counts(policy: ReadinessPolicy, role: EndpointRole) -> bool:
    if policy == "all":
        return True
    if policy == "sources":
        return role == "source"
    return False


def judge(policy: ReadinessPolicy, endpoints: Iterable[EndpointState],
          routes: Iterable[RouteState], *, started: bool = True) -> Readiness:
    """Readiness under `policy`. Not started (routes not built yet) is never ready."""
    route_ok: dict[str, bool] = {}
    not_ready: list[dict[str, JSON]] = []
    ignored: list[dict[str, JSON]] = []
    seen: set[tuple[str, EndpointRole]] = set()
    for state in endpoints:
        route_ok[state.route] = route_ok.get(state.route, True) and state.connected
        if state.connected or (state.endpoint, state.role) in seen:
            continue
        seen.add((state.endpoint, state.role))
        entry: dict[str, JSON] = {"endpoint": state.endpoint, "role": state.role,
                                  "route": state.route, "why": "not connected"}
        (not_ready if _counts(policy, state.role) else ignored).append(entry)
    stalled: dict[str, list[JSON]] = {}
    for route in routes:
        route_ok.setdefault(route.route, True)
        if route.state == RUNNING:
            continue
        route_ok[route.route] = False
        if route.details:
            stalled[route.route] = list(route.details)
        entry = {"route": route.route, "state": route.state,
                 "why": route.why or route.state}
        (ignored if policy == "none" else not_ready).append(entry)
    if not started:
        not_ready.insert(0, {"why": "starting"})
    ready = started and not not_ready
    return Readiness(ready, policy, route_ok, not_ready, ignored, stalled)


__all__ = ["RUNNING", "EndpointRole", "EndpointState", "Readiness", "RouteState", "judge"]
