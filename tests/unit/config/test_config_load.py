"""Valid configs: the demo deployment, defaults, env substitution, *_file secrets, masking."""

from __future__ import annotations

from pathlib import Path

from gateway.config import (
    CONFIG_SPEC,
    GatewayConfig,
    Secret,
    load_config,
    load_config_text,
    redact_uri,
)
from gateway.policies.retry import RetryPolicy
from gateway.ports import TlsSettings

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "config/examples/store.xreg.json"
EXTRA = ROOT / "config/examples/demo-endpoints.xreg.json"
BASE = f"""definitions: ["{STORE}", "{EXTRA}"]
routes:
  - from: store-mqtt
    to: [events-kafka, events-nats]
deadletter: store-deadletter
"""


def _load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> GatewayConfig:
    config, problems = load_config_text(text, "gw.yaml", tmp_path, environ=env or {})
    errors = [p for p in problems if p.is_error]
    assert config is not None, errors
    assert not errors
    return config


def test_demo_config_is_valid_and_complete() -> None:
    config, problems = load_config(ROOT / "config/demo.yaml", environ={})
    assert config is not None, [str(p) for p in problems]
    assert [p for p in problems if p.file == str(ROOT / "config/demo.yaml")] == []
    route = config.routes[0]
    assert (route.source, route.targets, route.mode) == (
        "store-mqtt", ("events-kafka", "events-nats"), "binary")
    assert route.messagegroups == ("store",)
    assert {m.message_id for m in route.messages} == {"cashierdesk", "storestatus"}
    assert config.deadletter == "store-deadletter"
    assert set(config.endpoints) == {"store-mqtt", "events-kafka", "events-nats",
                                     "store-deadletter"}
    mqtt = config.endpoints["store-mqtt"]
    assert mqtt.uri == "mqtt://127.0.0.1:1883"
    assert mqtt.options == {"topicfilter": "/store/+/#", "qos": 1}
    assert config.endpoints["events-kafka"].bootstrap_servers == ("127.0.0.1:9092",)
    assert config.admin.listen == "127.0.0.1:9464"


def test_demo_config_follows_ephemeral_ports_from_env() -> None:
    env = {"XRGW_MQTT_URI": "mqtt://127.0.0.1:40001", "XRGW_KAFKA_URI": "kafka://127.0.0.1:40002",
           "XRGW_NATS_URI": "nats://127.0.0.1:40003", "XRGW_ADMIN_LISTEN": "127.0.0.1:0"}
    config, _ = load_config(ROOT / "config/demo.yaml", environ=env)
    assert config is not None
    assert config.endpoints["store-mqtt"].uri == "mqtt://127.0.0.1:40001"
    assert config.endpoints["events-kafka"].bootstrap_servers == ("127.0.0.1:40002",)
    assert config.endpoints["store-deadletter"].bootstrap_servers == ("127.0.0.1:40002",)
    assert config.endpoints["events-nats"].uri == "nats://127.0.0.1:40003"
    assert config.admin.port == 0


def test_defaults(tmp_path: Path) -> None:
    config = _load(tmp_path, BASE)
    route = config.routes[0]
    assert (route.mode, route.deliver, route.ambiguity, route.inflight) == (
        "binary", "cloudevent", "first", 4096)
    # No retry limit while a failure is transient: a broker restart is back-pressure.
    assert route.retry == RetryPolicy(0, 0.2, 10.0) and route.retry.unlimited
    assert route.stall_after == 30.0
    assert (config.log.level, config.log.format, config.shutdown.grace) == ("info", "json", 30.0)
    assert (config.admin.host, config.admin.port) == ("127.0.0.1", 9464)
    assert config.definitions[0].location == str(STORE)


def test_every_option_parses(tmp_path: Path) -> None:
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs/store.xreg.json").write_text(STORE.read_text())
    (tmp_path / "ca.pem").write_text("pem")
    text = f"""definitions: [defs, "{EXTRA}"]
routes:
  - from: store-mqtt
    to: [events-nats]
    mode: structured
    messagegroups: ["#/messagegroups/store"]
    ambiguity: deadletter
    inflight: 8
    retry: {{attempts: 2, initial_backoff: 500ms, max_backoff: 1m30s}}
deadletter: log
admin: {{listen: "[::1]:9000"}}
log: {{level: debug, format: text}}
shutdown: {{grace: 2m}}
endpoints:
  store-mqtt:
    tls: {{ca_file: ca.pem, insecure: true}}
    options: {{qos: 0, topic-filter: /x/#}}
"""
    config = _load(tmp_path, text)
    route = config.routes[0]
    assert route.messagegroups == ("store",)
    assert route.retry == RetryPolicy(2, 0.5, 90.0)
    assert (route.inflight, route.ambiguity, route.mode) == (8, "deadletter", "structured")
    assert config.deadletter is None
    assert (config.admin.host, config.admin.port, config.admin.listen) == ("::1", 9000,
                                                                           "[::1]:9000")
    assert config.shutdown.grace == 120.0
    mqtt = config.endpoints["store-mqtt"]
    assert mqtt.tls is not None and mqtt.tls.insecure
    assert mqtt.tls == TlsSettings(ca_file=str(tmp_path / "ca.pem"), insecure=True)
    # option spellings are compared like the definitions reader does
    assert mqtt.options == {"topicfilter": "/x/#", "qos": 0}
    assert config.definitions[0].location == str(tmp_path / "defs")


def test_env_substitution_with_defaults_and_escape(tmp_path: Path) -> None:
    text = BASE + """endpoints:
  store-mqtt:
    uri: ${MQTT_URI}
    username: ${MQTT_USER:-guest}
    client_id: "$${literal}-${HOST:-h}"
"""
    config, problems = load_config_text(text, "gw.yaml", tmp_path,
                                        environ={"MQTT_URI": "mqtts://broker:8883"})
    assert config is not None
    mqtt = config.endpoints["store-mqtt"]
    assert (mqtt.uri, mqtt.username, mqtt.client_id) == ("mqtts://broker:8883", "guest",
                                                         "${literal}-h")
    assert [p.path for p in problems if p.file == "gw.yaml"] == []


def test_env_values_fill_typed_fields(tmp_path: Path) -> None:
    text = BASE.replace("    to: [events-kafka, events-nats]\n",
                        "    to: [events-kafka, events-nats]\n    inflight: ${INFLIGHT}\n")
    config = _load(tmp_path, text, {"INFLIGHT": "32"})
    assert config.routes[0].inflight == 32


def test_secret_files_are_read_and_stripped(tmp_path: Path) -> None:
    (tmp_path / "user").write_text("alice\n")
    (tmp_path / "pw").write_text("  s3cret-pw \n")
    text = BASE + """endpoints:
  store-mqtt: {username_file: user, password_file: pw}
"""
    mqtt = _load(tmp_path, text).endpoints["store-mqtt"]
    assert mqtt.username == "alice"
    assert mqtt.password == Secret("s3cret-pw")
    assert mqtt.password is not None and mqtt.password.reveal() == "s3cret-pw"


def test_secrets_never_show_in_reprs(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("file-secret")
    text = BASE + """endpoints:
  store-mqtt: {password_file: pw, uri: "mqtt://bob:uri-secret@broker:1883"}
  events-kafka: {password: "${KAFKA_PW}"}
"""
    config = _load(tmp_path, text, {"KAFKA_PW": "env-secret"})
    shown = repr(config) + str(config) + repr(config.endpoints)
    for secret in ("file-secret", "uri-secret", "env-secret"):
        assert secret not in shown
    assert "Secret('***')" in shown
    assert "mqtt://bob:***@broker:1883" in shown
    kafka_pw = config.endpoints["events-kafka"].password
    assert kafka_pw is not None and kafka_pw.reveal() == "env-secret"
    assert str(kafka_pw) == "***"


def test_redact_uri_leaves_plain_uris_alone() -> None:
    assert redact_uri("nats://h:4222") == "nats://h:4222"
    assert redact_uri("amqps://u:p@h:5671/q") == "amqps://u:***@h:5671/q"


def test_registry_source(tmp_path: Path) -> None:
    # Parsing only: a registry URL would be fetched by load_catalog, so inspect the spec.
    url = CONFIG_SPEC.member("definitions")
    assert url is not None and url.item is not None
    registry = url.item.variants[1]
    assert [f.name for f in registry.fields] == ["url", "poll", "headers", "ca_file"]
