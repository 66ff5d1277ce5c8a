"""The Helm chart (helm/xrgw), rendered and linted with the real Helm library (PyPI
`helm-python-sdk`), for the default, bridge and sidecar values; the manifests validated
against the Kubernetes schemas (PyPI `kubernetes-validate`, bundled, offline); the
rendered gateway config checked by `load_config`; the values schema checked against the
config spec (and its config part generated from it); every extension point
(ci/extensions-values.yaml), the NetworkPolicy, the `helm test` hook and autoscaling on
backlog rendered and linted; the sidecar template exercised through the example
application chart.

The metrics the dashboard and alert rules use are checked against a running gateway in
tests/integration/test_ship_metrics.py; here only against the declared metric families.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate.utils as kv
import pytest
import yaml

from gateway.config import CONFIG_SPEC, load_config
from gateway.observability.metrics import ENDPOINT_LABEL, Metrics

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "xrgw"
APP_CHART = ROOT / "helm" / "examples" / "app-with-sidecar"
KUBE_VERSIONS = ("1.29.0", "1.33.0")
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
VALUES = {
    "default": {},
    "bridge": yaml.safe_load((CHART / "ci" / "bridge-values.yaml").read_text()),
    "sidecar": yaml.safe_load((CHART / "ci" / "sidecar-values.yaml").read_text()),
    "extensions": yaml.safe_load((CHART / "ci" / "extensions-values.yaml").read_text()),
}


@pytest.fixture(scope="module")
def chart() -> Any:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def _render(chart: Any, values: dict[str, Any]) -> list[dict[str, Any]]:
    manifests = chart.render(values, name="gw", namespace="ops", is_install=True)
    out = []
    for path, text in manifests.items():
        if not path.endswith((".yaml", ".yml")):
            continue
        out.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return out


def _kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = _kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def _check_crd(doc: dict[str, Any]) -> None:
    """Prometheus Operator objects: the bundled schemas have no CRDs, so check shape."""
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    spec = doc["spec"]
    if doc["kind"] == "PrometheusRule":
        for group in spec["groups"]:
            for rule in group["rules"]:
                assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}
                assert rule["alert"] and rule["expr"]
                assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    else:
        endpoints = spec.get("endpoints") or spec.get("podMetricsEndpoints")
        assert endpoints and all(e["port"] == "admin" and e["path"] == "/metrics"
                                 for e in endpoints)
        # xrgw_endpoint does not collide with the operator's `endpoint` target label:
        # no honorLabels needed (it stays a choice for the deprecated label's sake)
        assert all(e["honorLabels"] is False for e in endpoints)
        assert spec["selector"]["matchLabels"]


# ------------------------------------------------------------------ lint and schemas


@pytest.mark.parametrize("case", sorted(VALUES))
def test_lint_has_no_errors_or_warnings(case: str) -> None:
    report = helm.lint(CHART, VALUES[case], strict=True, namespace="ops")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("case", sorted(VALUES))
def test_rendered_manifests_validate_against_kubernetes_schemas(chart: Any, case: str) -> None:
    docs = _render(chart, VALUES[case])
    assert docs
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            _check_crd(doc)
            continue
        for version in KUBE_VERSIONS:
            try:
                kv.validate(doc, version, strict=True)
            except kv.ValidationError as exc:
                pytest.fail(f"{case}: {doc['kind']}/{doc['metadata']['name']} "
                            f"(Kubernetes {version}): {exc.message} at {list(exc.path)}")


def test_bridge_renders_every_object(chart: Any) -> None:
    kinds = sorted(d["kind"] for d in _render(chart, VALUES["bridge"]))
    assert kinds == sorted(["ConfigMap", "ConfigMap", "Deployment", "HorizontalPodAutoscaler",
                            "NetworkPolicy", "PodDisruptionBudget", "PrometheusRule", "Service",
                            "ServiceAccount", "ServiceMonitor", "Pod"])  # Pod: helm test


def test_default_renders_a_bridge_without_optional_objects(chart: Any) -> None:
    kinds = sorted(d["kind"] for d in _render(chart, {}))
    assert kinds == ["ConfigMap", "Deployment", "NetworkPolicy", "Pod", "PodDisruptionBudget",
                     "Service", "ServiceAccount"]


def test_sidecar_mode_renders_only_config_and_monitoring(chart: Any) -> None:
    kinds = sorted(d["kind"] for d in _render(chart, VALUES["sidecar"]))
    assert kinds == ["ConfigMap", "PrometheusRule"]


# ------------------------------------------------------------------ the bridge Deployment


@pytest.mark.parametrize("case", ["default", "bridge"])
def test_bridge_pod_is_locked_down_and_probed(chart: Any, case: str) -> None:
    docs = _render(chart, VALUES[case])
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert "health" not in {p["name"] for p in container["ports"]}  # admin is reachable
    assert container["args"] == ["-c", "/etc/xrgw/config.yaml"]
    assert not container["image"].endswith(":latest") and ":" in container["image"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/xrgw"]["readOnly"] is True
    assert "/tmp" in mounts  # the only writable path
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert container["resources"]["requests"]
    assert pod["terminationGracePeriodSeconds"] > 30  # > shutdown.grace


def test_bridge_secrets_service_and_scaling(chart: Any) -> None:
    docs = _render(chart, VALUES["bridge"])
    deployment = _one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert "replicas" not in deployment["spec"]  # the HPA owns it
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"xrgw-mqtt-credentials", "xrgw-broker-tls"}
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert {"/run/secrets/xrgw/mqtt", "/run/secrets/xrgw/broker-tls"} <= mounts
    ports = {p["name"]: p["port"] for p in _one(docs, "Service")["spec"]["ports"]}
    assert ports == {"admin": 9464, "http": 8080}
    assert _one(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 2
    hpa = _one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]


# ------------------------------------------------------------------ the rendered config


def _materialize(docs: list[dict[str, Any]], values: dict[str, Any], tmp: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Path:
    """Write the rendered ConfigMap as the pod sees it, with secret mounts under tmp."""
    (config_map,) = [d for d in _kind(docs, "ConfigMap") if "config.yaml" in d["data"]]
    etc = tmp / "etc-xrgw"
    etc.mkdir()
    for name, text in config_map["data"].items():
        (etc / name).write_text(text)
    config = (etc / "config.yaml").read_text()
    for mount in values.get("secretMounts", []):
        path = mount.get("mountPath") or f"/run/secrets/xrgw/{mount['name']}"
        local = tmp / "secrets" / mount["name"]
        local.mkdir(parents=True)
        for file in set(re.findall(re.escape(path) + r"/([\w.-]+)", config)):
            (local / file).write_text("secret\n")
        config = config.replace(path, str(local))
    (etc / "config.yaml").write_text(config)
    for env in values.get("env", []) + values.get("extraEnv", []):
        monkeypatch.setenv(env["name"], env["value"])
    monkeypatch.setenv("XRGW_CLIENT_ID", "gw-xrgw-abc12")
    return etc / "config.yaml"


@pytest.mark.parametrize("case", sorted(VALUES))
def test_rendered_config_loads(chart: Any, case: str, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    values = VALUES[case]
    path = _materialize(_render(chart, values), values, tmp_path, monkeypatch)
    config, problems = load_config(path)
    assert config is not None, [str(p) for p in problems]
    assert [str(p) for p in problems] == []
    listen = yaml.safe_load(path.read_text())["admin"]["listen"]
    assert listen == ("127.0.0.1:9464" if case == "sidecar" else "0.0.0.0:9464")
    # a loopback admin server gets the probes-only listener the kubelet can reach
    assert config.admin.health == (("0.0.0.0", 9465) if case == "sidecar" else None)


@pytest.mark.parametrize(("case", "overrides", "policy"), [
    ("default", {}, "all"),
    ("bridge", {}, "all"),
    # a sidecar's readiness is its application pod's: it must not follow a remote broker
    ("sidecar", {}, "none"),
    ("bridge", {"admin": {"readiness": "sources"}}, "sources"),
    ("sidecar", {"admin": {"readiness": "sources"}}, "sources"),
])
def test_readiness_policy_per_mode(chart: Any, case: str, overrides: dict[str, Any],
                                   policy: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    values = copy.deepcopy(VALUES[case])
    for key, value in overrides.items():
        values.setdefault(key, {}).update(value)
    path = _materialize(_render(chart, values), values, tmp_path, monkeypatch)
    assert yaml.safe_load(path.read_text())["admin"]["readiness"] == policy
    config, problems = load_config(path)
    assert config is not None, [str(p) for p in problems]
    assert config.admin.readiness == policy


def test_readiness_probe_path_is_configurable(chart: Any) -> None:
    values = {"probes": {"readiness": {"path": "/healthz", "periodSeconds": 5,
                                       "timeoutSeconds": 3, "failureThreshold": 3}}}
    container = _one(_render(chart, values), "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    with pytest.raises(helm.HelmValuesError):
        _render(chart, {"admin": {"readiness": "sometimes"}})


def test_preflight_init_container_and_helm_test_run_validate_connect(chart: Any) -> None:
    values = copy.deepcopy(VALUES["bridge"])
    values["preflight"] = {"initContainer": True, "helmTest": True, "strict": True,
                           "timeout": 3}
    docs = _render(chart, values)
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            kv.validate(doc, KUBE_VERSIONS[-1], strict=True)
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    (init,) = [c for c in pod["initContainers"] if c["name"] == "xrgw-preflight"]
    command = ["xrgw", "validate", "--connect", "-c", "/etc/xrgw/config.yaml",
               "--timeout", "3", "--strict"]
    assert init["command"] == command
    gateway = pod["containers"][0]
    # the same config, secrets and environment as the gateway
    assert init["volumeMounts"] == gateway["volumeMounts"]
    assert init["env"] == gateway["env"] and init["image"] == gateway["image"]
    tests = [d for d in _kind(docs, "Pod") if d["metadata"]["name"].endswith("preflight")]
    (test,) = tests
    assert test["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert test["spec"]["containers"][0]["command"] == command
    # off by default
    default = _render(chart, VALUES["bridge"])
    assert "initContainers" not in _one(default, "Deployment")["spec"]["template"]["spec"]
    assert not [d for d in _kind(default, "Pod") if "preflight" in d["metadata"]["name"]]


def test_bridge_values_documents_are_the_config_examples() -> None:
    for document in VALUES["bridge"]["definitions"]["documents"]:
        example = ROOT / "config" / "examples" / document["name"]
        assert document["content"] == json.loads(example.read_text()), document["name"]


def test_document_named_config_yaml_is_refused(chart: Any) -> None:
    with pytest.raises(helm.HelmValuesError):
        chart.render({"definitions": {"documents": [{"name": "config.yaml", "content": {}}]}})


@pytest.mark.parametrize("values, where", [
    ({"mode": "daemonset"}, "/mode"),
    ({"image": {"tag": "latest"}}, "/image/tag"),
    ({"config": {"routes": [{"from": "a", "to": ["b"], "bogus": 1}], "deadletter": "log"}},
     "/config/routes/0"),
    ({"config": {"routes": [], "deadletter": "log"}}, "/config/routes"),
    ({"config": {"admin": {"listen": "0.0.0.0:1"}}}, "/config"),
    ({"config": {"routes": [{"from": "a", "to": ["b"], "mode": "batch"}],
                 "deadletter": "log"}}, "/config/routes/0/mode"),
    ({"config": {"shutdown": {"grace": "thirty seconds"}}}, "/config/shutdown/grace"),
    ({"securityContext": {"runAsNonRoot": False, "readOnlyRootFilesystem": True}},
     "/securityContext/runAsNonRoot"),
    ({"replicaCount": "two"}, "/replicaCount"),
    ({"secretMounts": [{"name": "mqtt"}]}, "/secretMounts/0"),
    ({"prometheusRule": {"enabled": True, "unmatchedRatio": "high"}},
     "/prometheusRule/unmatchedRatio"),
    ({"prometheusRule": {"enabled": True, "inflightRatio": 1.5}},
     "/prometheusRule/inflightRatio"),
    ({"extraArgs": [1]}, "/extraArgs/0"),
    ({"extraVolumeMounts": [{"name": "x"}]}, "/extraVolumeMounts/0"),
    ({"commonLabels": {"team": 1}}, "/commonLabels/team"),
    ({"networkPolicy": {"enabled": True, "bogus": 1}}, "/networkPolicy"),
    ({"autoscaling": {"backlog": {"enabled": True, "metric": "cpu"}}},
     "/autoscaling/backlog/metric"),
    ({"config": {"routes": [{"from": "a", "to": ["b"], "inflight": 0}],
                 "deadletter": "log"}}, "/config/routes/0/inflight"),
    ({"definitions": {"registries": [{"url": "ftp://registry"}]}},
     "/definitions/registries/0/url"),
])
def test_wrong_values_fail_at_install_time(chart: Any, values: dict[str, Any],
                                           where: str) -> None:
    with pytest.raises(helm.HelmValuesError) as info:
        chart.render(values, name="gw", namespace="ops", is_install=True)
    assert f"at '{where}'" in str(info.value)


def test_values_schema_follows_the_config_spec() -> None:
    """The chart's schema of `config` has the keys, enums and required keys of
    `gateway.config.CONFIG_SPEC` (without `definitions` and `admin`, written by the chart)."""
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["config"]

    def check(spec: Any, node: dict[str, Any], where: str, skip: tuple[str, ...] = ()) -> None:
        fields = {f.name: f for f in spec.fields if f.name not in skip}
        assert set(node["properties"]) == set(fields), where
        assert node.get("additionalProperties") is False, where
        required = sorted(n for n, f in fields.items() if f.required)
        assert sorted(node.get("required", [])) == required, where
        for name, field in fields.items():
            sub = node["properties"][name]
            if field.kind == "enum":  # `${VAR}` is allowed beside the choices
                choices = sub["enum"] if "enum" in sub else sub["anyOf"][0]["enum"]
                assert choices == list(field.choices), f"{where}.{name}"
            elif field.kind == "object":
                check(field, sub, f"{where}.{name}")
            elif field.kind == "list" and field.item is not None and field.item.kind == "object":
                check(field.item, sub["items"], f"{where}.{name}[]")
            elif field.kind == "map" and field.item is not None and field.item.kind == "object":
                check(field.item, sub["additionalProperties"], f"{where}.{name}.<id>")

    check(CONFIG_SPEC, schema, "config", skip=("definitions", "admin"))
    # definitions.registries[] are the registry sources of `definitions`
    definitions = CONFIG_SPEC.member("definitions")
    assert definitions is not None and definitions.item is not None
    (registry,) = [v for v in definitions.item.variants if v.kind == "object"]
    values = json.loads((CHART / "values.schema.json").read_text())["properties"]
    node = values["definitions"]["properties"]["registries"]["items"]
    check(registry, node, "definitions.registries[]")


def test_values_schema_config_part_is_generated_from_the_config_spec() -> None:
    """values.schema.json is what scripts/chart_values_schema.py makes of it: regenerate
    with `python -m scripts.chart_values_schema` after changing the config spec."""
    from scripts import chart_values_schema as generator

    text = (CHART / "values.schema.json").read_text()
    assert generator.render(generator.generated(json.loads(text))) == text
    assert generator.main(["--check"]) == 0
    schema = json.loads(text)["properties"]
    assert schema["config"] == generator.chart_config_schema()
    # the generator can fail: an edited config part is detected
    stale = json.loads(text)
    stale["properties"]["config"]["properties"].pop("routes")
    assert generator.render(generator.generated(stale)) == text


# ------------------------------------------------------------------ extension points


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod: dict[str, Any] = _one(docs, "Deployment")["spec"]["template"]["spec"]
    return pod


def test_extension_points_reach_the_pod(chart: Any) -> None:
    values = VALUES["extensions"]
    docs = _render(chart, values)
    deployment = _one(docs, "Deployment")
    pod = _pod(docs)
    (container,) = pod["containers"]
    assert container["args"] == ["-c", "/etc/xrgw/config.yaml", "--log-level", "debug"]
    env = {e["name"]: e for e in container["env"]}
    assert env["HTTPS_PROXY"]["value"] == "http://proxy.internal.example:3128"
    assert {"XRGW_POD_NAME", "XRGW_CLIENT_ID"} <= set(env)  # the chart's own stay
    assert container["envFrom"] == values["envFrom"]
    assert values["extraVolumeMounts"][0] in container["volumeMounts"]
    assert values["extraVolumes"][0] in pod["volumes"]
    assert {"xrgw-config", "xrgw-tmp"} <= {v["name"] for v in pod["volumes"]}
    assert pod["initContainers"] == values["initContainers"]
    assert pod["topologySpreadConstraints"] == values["topologySpreadConstraints"]
    assert pod["priorityClassName"] == "messaging-high"
    template = deployment["spec"]["template"]["metadata"]
    assert template["labels"]["sidecar.istio.io/inject"] == "false"
    assert template["annotations"] == values["podAnnotations"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    for doc in docs:  # commonLabels on every object, never in a selector
        labels = doc["metadata"]["labels"]
        assert labels["team"] == "messaging" and labels["cost-center"] == "4711", doc["kind"]
    assert "team" not in selector
    assert "team" not in _one(docs, "Service")["spec"]["selector"]


def test_env_is_kept_beside_extra_env(chart: Any) -> None:
    docs = _render(chart, {"env": [{"name": "A", "value": "1"}],
                           "extraEnv": [{"name": "B", "value": "2"}]})
    names = [e["name"] for e in _pod(docs)["containers"][0]["env"]]
    assert names[-2:] == ["A", "B"]


def test_sidecar_container_and_volumes_carry_the_extensions(app_chart: Path) -> None:
    extra = {"extraArgs": ["--log-level", "debug"],
             "extraEnv": [{"name": "B", "value": "2"}],
             "extraVolumes": [{"name": "ca", "configMap": {"name": "ca"}}],
             "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ca"}]}
    with helm.Chart.load(app_chart) as chart:
        docs = _render(chart, {"xrgw": extra})
    for doc in docs:
        kv.validate(doc, KUBE_VERSIONS[-1], strict=True)
    pod = _pod(docs)
    (xrgw,) = [c for c in pod["containers"] if c["name"] == "xrgw"]
    assert xrgw["args"][-2:] == ["--log-level", "debug"]
    assert {"name": "B", "value": "2"} in xrgw["env"]
    assert extra["extraVolumeMounts"][0] in xrgw["volumeMounts"]
    assert extra["extraVolumes"][0] in pod["volumes"]


def test_network_policy_admits_monitoring_to_admin_and_named_sources_to_http(
        chart: Any) -> None:
    values = VALUES["extensions"]
    docs = _render(chart, values)
    policy = _one(docs, "NetworkPolicy")
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == _one(docs, "Deployment")["spec"][
        "selector"]["matchLabels"]
    assert spec["policyTypes"] == ["Ingress"]
    admin, http = spec["ingress"]
    assert admin["ports"] == [{"port": "admin", "protocol": "TCP"}]
    monitoring, test_pod = admin["from"]
    assert monitoring == {
        "namespaceSelector": values["networkPolicy"]["metrics"]["namespaceSelector"],
        "podSelector": values["networkPolicy"]["metrics"]["podSelector"]}
    # the helm test pod may ask /readyz; its labels are the ones selected here
    hook = next(d for d in docs if d["kind"] == "Pod")
    assert test_pod["podSelector"]["matchLabels"].items() <= hook["metadata"]["labels"].items()
    assert http == {"ports": [{"port": "http", "protocol": "TCP"}],
                    "from": values["networkPolicy"]["httpIngressFrom"]}
    # defaults: on, scrapers from any namespace (scraping keeps working), the HTTP ingress
    # port from any source (it is there for senders), nothing else
    docs = _render(chart, {"httpIngress": {"enabled": True, "port": 8080}})
    admin, http = _one(docs, "NetworkPolicy")["spec"]["ingress"]
    assert admin["from"][0] == {"namespaceSelector": {}}
    assert http == {"ports": [{"port": "http", "protocol": "TCP"}]}
    (admin,) = _one(_render(chart, {}), "NetworkPolicy")["spec"]["ingress"]
    assert admin["ports"] == [{"port": "admin", "protocol": "TCP"}]
    assert "NetworkPolicy" not in {d["kind"] for d in _render(
        chart, {"networkPolicy": {"enabled": False}})}
    assert "NetworkPolicy" not in {d["kind"] for d in _render(chart, dict(
        VALUES["sidecar"], networkPolicy={"enabled": True}))}  # the app owns its pods


def test_sample_pages_stay_on_loopback_by_default(chart: Any) -> None:
    """Bridge mode scrapes 0.0.0.0:<admin port>; /conformance and / (message samples) go
    to a loopback listener that no Service, container port or policy exposes."""
    docs = _render(chart, {})
    config = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap")["data"][
        "config.yaml"])
    assert config["admin"] == {"listen": "0.0.0.0:9464", "readiness": "all",
                               "pages": "auto", "pages_listen": "127.0.0.1:9466"}
    ports = [p["port"] for p in _one(docs, "Service")["spec"]["ports"]]
    assert 9466 not in ports
    container = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert 9466 not in [p["containerPort"] for p in container.get("ports", [])]
    config = yaml.safe_load(next(d for d in _render(chart, {"admin": {
        "port": 9464, "tokenFile": "/run/secrets/xrgw/admin/token"}})
        if d["kind"] == "ConfigMap")["data"]["config.yaml"])
    assert config["admin"]["token_file"] == "/run/secrets/xrgw/admin/token"


def test_helm_test_hook_asks_the_service_for_readyz(chart: Any) -> None:
    docs = _render(chart, VALUES["bridge"])
    hook = next(d for d in docs if d["kind"] == "Pod")
    annotations = hook["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "test"
    assert "hook-succeeded" in annotations["helm.sh/hook-delete-policy"]
    service = _one(docs, "Service")
    selector = service["spec"]["selector"]
    # the Service (and PDB, NetworkPolicy) must not select the test pod
    assert not selector.items() <= hook["metadata"]["labels"].items()
    (container,) = hook["spec"]["containers"]
    assert container["image"] == _pod(docs)["containers"][0]["image"]
    assert container["command"][-2] == f"http://{service['metadata']['name']}.ops.svc:9464/readyz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert hook["spec"]["restartPolicy"] == "Never"
    # the script itself: exit 0 once /readyz answers 200, exit 1 when it never does
    script = container["command"][2]
    assert _run_readyz_script(script, 200) == 0
    assert _run_readyz_script(script, 503) == 1
    assert "Pod" not in {d["kind"] for d in _render(chart, {"helmTest": {"enabled": False}})}


def _run_readyz_script(script: str, status: int) -> int:
    class Ready(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status if self.path == "/readyz" else 404)
            self.end_headers()
            self.wfile.write(b'{"ready": true}')

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/readyz"
        return subprocess.run([sys.executable, "-c", script, url, "1"], capture_output=True,
                              timeout=60).returncode
    finally:
        server.shutdown()


def test_autoscaling_on_backlog_adds_an_external_metric(chart: Any) -> None:
    hpa = _one(_render(chart, VALUES["extensions"]), "HorizontalPodAutoscaler")
    external = [m["external"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert external == [{
        "metric": {"name": "xrgw_consumer_lag", "selector": {"matchLabels": {
            "namespace": "ops", "endpoint": "orders-kafka"}}},
        "target": {"type": "AverageValue", "averageValue": "500"}}]
    hpa = _one(_render(chart, VALUES["bridge"]), "HorizontalPodAutoscaler")
    assert [m["type"] for m in hpa["spec"]["metrics"]] == ["Resource"]  # off by default


def test_inflight_alert_is_a_ratio_of_the_window(chart: Any) -> None:
    docs = _render(chart, VALUES["extensions"])
    rules = {r["alert"]: r for g in _one(docs, "PrometheusRule")["spec"]["groups"]
             for r in g["rules"]}
    expr = rules["XrgwInflightSaturated"]["expr"]
    assert "xrgw_messages_inflight{" in expr and "/ xrgw_messages_inflight_limit{" in expr
    assert expr.strip().endswith("> 0.8")
    with pytest.raises(helm.HelmError, match="inflightRatio"):
        chart.render({"prometheusRule": {"enabled": True, "inflightHigh": 230}},
                     name="gw", namespace="ops")


def test_chart_names_the_real_project_and_documents_overrides() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert meta["home"] == "https://github.com/xrgw/xrgw"
    assert values["image"]["repository"] == "ghcr.io/xrgw/xrgw"
    for text in (yaml.dump(meta), yaml.dump(values), (CHART / "README.md").read_text()):
        assert "example/xrgw" not in text
    readme = (CHART / "README.md").read_text()
    assert "--set image.repository=" in readme


# ------------------------------------------------------------------ sidecar


def _app_chart(tmp: Path) -> Path:
    """The example application chart with its xrgw dependency built (offline)."""
    shutil.copytree(ROOT / "helm", tmp / "helm")
    app = tmp / "helm" / "examples" / "app-with-sidecar"
    helm.dependency_build(app)
    return app


@pytest.fixture(scope="module")
def app_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _app_chart(tmp_path_factory.mktemp("app"))


@pytest.mark.parametrize("native", [False, True])
def test_example_app_chart_includes_the_sidecar(app_chart: Path, native: bool) -> None:
    report = helm.lint(app_chart, {"xrgw": {"sidecar": {"native": native}}}, strict=True)
    assert report["errors"] == []
    with helm.Chart.load(app_chart) as chart:
        docs = _render(chart, {"xrgw": {"sidecar": {"native": native}}})
    for doc in docs:
        kv.validate(doc, KUBE_VERSIONS[-1], strict=True)
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    where = pod["initContainers"] if native else pod["containers"]
    (xrgw,) = [c for c in where if c["name"] == "xrgw"]
    assert [c["name"] for c in pod["containers"]] == (["app"] if native else ["app", "xrgw"])
    assert (xrgw.get("restartPolicy") == "Always") is native
    assert xrgw["securityContext"]["readOnlyRootFilesystem"] is True
    # loopback-only admin: HTTP probes on the probes-only listener, no program per probe
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"),
                        ("readinessProbe", "/readyz")):
        assert xrgw[probe]["httpGet"] == {"path": path, "port": "health"}, probe
        assert "exec" not in xrgw[probe]
    ports = {p["name"]: p["containerPort"] for p in xrgw["ports"]}
    assert ports["health"] == 9465 and ports["admin"] == 9464
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_map = volumes["xrgw-config"]["configMap"]["name"]
    (rendered,) = [d for d in _kind(docs, "ConfigMap") if d["metadata"]["name"] == config_map]
    config = yaml.safe_load(rendered["data"]["config.yaml"])
    assert config["admin"] == {"listen": "127.0.0.1:9464", "health_listen": "0.0.0.0:9465",
                               "readiness": "none", "pages": "auto",
                               "pages_listen": "127.0.0.1:9466"}
    assert config["endpoints"]["app-http"]["uri"] == "http://127.0.0.1:8080"
    assert "Deployment" not in [d["kind"] for d in docs if "xrgw" in d["metadata"]["name"]]


def test_sidecar_with_a_service_monitor_needs_a_reachable_admin(chart: Any) -> None:
    values = dict(VALUES["sidecar"], serviceMonitor={"enabled": True})
    with pytest.raises(helm.HelmError, match="loopback"):
        chart.render(values, name="gw", namespace="ops")
    values["admin"] = {"port": 9464, "listen": "0.0.0.0:9464"}
    pod_monitor = _one(_render(chart, values), "PodMonitor")
    _check_crd(pod_monitor)


# ------------------------------------------------------------------ dashboard and alerts

METRIC = re.compile(r"\b(xrgw_[a-z_]+)\b")


def dashboard_and_rule_expressions(chart: Any) -> list[str]:
    docs = _render(chart, VALUES["bridge"])
    dashboard = json.loads(next(d for d in _kind(docs, "ConfigMap")
                                if "xrgw.json" in d["data"])["data"]["xrgw.json"])
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    rules = _one(docs, "PrometheusRule")["spec"]["groups"]
    exprs += [r["expr"] for g in rules for r in g["rules"]]
    return exprs


def _declared_samples() -> set[str]:
    names: set[str] = set()
    for family in Metrics().registry.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_count", "_sum"))
        else:
            names.add(family.name)
    return names


def test_dashboard_and_rules_use_declared_metrics_only(chart: Any) -> None:
    used = {m for e in dashboard_and_rule_expressions(chart) for m in METRIC.findall(e)}
    used.discard(ENDPOINT_LABEL)  # a label, not a metric
    assert used, "no metric found"
    assert used - _declared_samples() == set()


def test_dashboard_has_the_panels_ops_need() -> None:
    dashboard = json.loads((CHART / "dashboards" / "xrgw.json").read_text())
    exprs = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in dashboard["panels"]}
    needed = {
        "Throughput": "xrgw_messages_received_total",
        "Match rate per definition": "by (message) (rate(xrgw_messages_matched_total",
        "Dead letters by reason": "by (reason) (rate(xrgw_messages_deadlettered_total",
        "Latency (receive -> confirmed)": "xrgw_processing_seconds_bucket",
        "In flight per route": "xrgw_messages_inflight{",
        "Connection state": "xrgw_endpoint_connected",
        "Bytes in and out": "xrgw_published_bytes_total",
        "Consumer backlog": "xrgw_consumer_pending",
        "Memory per pod": "process_resident_memory_bytes",
        "CPU per pod": "process_cpu_seconds_total",
    }
    for title, expr in needed.items():
        assert expr in exprs.get(title, ""), title
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
