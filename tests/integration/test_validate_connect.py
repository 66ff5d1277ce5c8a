"""`xrgw validate --connect` (and `--strict`) against real brokers, run as an operator
runs it (the CLI in a subprocess): Mosquitto with TLS and a password, nats-server with
an NKey user over TLS, nats-server in operator mode (decentralized auth: a .creds file
of a user JWT signed by a trusted account, and one of an account it does not trust),
Tansu (Kafka). Right and wrong password, a wrong CA, a missing topic or JetStream stream,
a wrong NKey; each result at the endpoint's line in the config, in text and JSON.
Also `validate` without `--connect`: an NKey seed file that does not parse is refused,
as `run` refuses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import nkeys  # type: ignore[import-untyped]
import pytest

from harness.brokers import Mosquitto, NatsServer, free_port
from harness.faults.readers import create_topics
from harness.tls import Pki, make_pki
from tests.integration.support import tls_files

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pw-" + uuid.uuid4().hex


def _seed() -> tuple[str, str]:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    return seed.decode(), nkeys.from_seed(seed).public_key.decode()


SEED, PUBLIC = _seed()
OTHER_SEED, _ = _seed()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def mqtts(pki: Pki) -> Iterator[Mosquitto]:
    with Mosquitto(tls=tls_files(pki), users={"alice": PASSWORD}) as broker:
        yield broker


@pytest.fixture(scope="module")
def nats_nkey(pki: Pki) -> Iterator[NatsServer]:
    with NatsServer(tls=tls_files(pki), nkeys=(PUBLIC,)) as broker:
        yield broker


def _doc() -> dict[str, object]:
    webhooks = json.loads((ROOT / "config/examples/http-webhooks.xreg.json").read_text())
    endpoints = {
        "webhooks-http": webhooks["endpoints"]["webhooks-http"],
        "out-mqtt": {"usage": ["producer"], "protocol": "MQTT/5.0",
                     "protocoloptions": {"endpoints": [{"uri": "mqtt://h:1883"}],
                                         "topic": "validate/out"}},
        "out-nats": {"usage": ["producer"], "protocol": "NATS",
                     "protocoloptions": {"endpoints": [{"uri": "nats://h:4222"}],
                                         "subject": "validate.out"}},
        "spare-mqtt": {"usage": ["producer"], "protocol": "MQTT/5.0",
                       "protocoloptions": {"endpoints": [{"uri": "mqtt://h:1883"}]}},
        "out-kafka": {"usage": ["producer"], "protocol": "KAFKA",
                      "protocoloptions": {"endpoints": [{"uri": "kafka://h:9092"}],
                                          "topic": "validate-out"}},
    }
    return {**webhooks, "endpoints": endpoints}


def _write(tmp: Path, *, mqtt: str, nats: str, kafka: str, topic: str, password: str,
           ca: Path, seed: str) -> Path:
    (tmp / "validate.xreg.json").write_text(json.dumps(_doc()))
    (tmp / "user.nk").write_text(seed + "\n")
    (tmp / "password").write_text(password + "\n")
    path = tmp / "gateway.yaml"
    path.write_text(f"""definitions: [validate.xreg.json]
routes:
  - from: webhooks-http
    to: [out-mqtt, out-nats, out-kafka]
deadletter: log
endpoints:
  webhooks-http:
    uri: http://127.0.0.1:{free_port()}
  out-mqtt:
    uri: {mqtt}
    username: alice
    password_file: password
    tls: {{ca_file: {ca}}}
  out-nats:
    uri: {nats}
    tls: {{ca_file: {ca}}}
    options: {{nkey_seed_file: user.nk}}
  out-kafka:
    uri: {kafka}
    options: {{topic: {topic}}}
""")
    return path


def _validate(config: Path, *extra: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "validate", "-c", str(config), *extra],
        capture_output=True, text=True, timeout=180, cwd=config.parent)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def _line_of(config: Path, key: str) -> int:
    for number, line in enumerate(config.read_text().splitlines(), 1):
        if line.strip() == f"{key}:":
            return number
    raise AssertionError(key)


@pytest.fixture(scope="module")
def topic(tansu) -> str:  # type: ignore[no-untyped-def]
    import asyncio

    name = f"validate-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topics(tansu, name))
    return name


def _config(tmp: Path, mqtts: Mosquitto, nats_nkey: NatsServer, tansu, pki: Pki,  # type: ignore[no-untyped-def]
            topic: str, **changes: object) -> Path:
    values: dict[str, object] = {"mqtt": mqtts.url, "nats": nats_nkey.url, "kafka": tansu.url,
                                 "topic": topic, "password": PASSWORD, "ca": pki.ca,
                                 "seed": SEED}
    values.update(changes)
    return _write(tmp, **values)  # type: ignore[arg-type]


def test_everything_right_passes_with_one_result_per_endpoint(
        tmp_path, mqtts, nats_nkey, tansu, pki, topic) -> None:  # type: ignore[no-untyped-def]
    config = _config(tmp_path, mqtts, nats_nkey, tansu, pki, topic)
    code, out, err = _validate(config, "--connect")
    assert code == 0, out + err
    lines = {line.split("endpoint '")[1].split("'")[0]: line
             for line in out.splitlines() if ": endpoint '" in line}
    assert set(lines) == {"webhooks-http", "out-mqtt", "out-nats", "out-kafka"}, out
    assert lines["out-kafka"].startswith(
        f"{config}:{_line_of(config, 'out-kafka')}:3: ok: "), out
    assert f"topic {topic} exists" in lines["out-kafka"]
    assert "can be listened on" in lines["webhooks-http"]
    # The harness's certificates live one day: the expiry warning, which --strict fails.
    for endpoint in ("out-mqtt", "out-nats"):
        assert lines[endpoint].startswith(
            f"{config}:{_line_of(config, endpoint)}:3: warning: "), lines[endpoint]
        assert "certificate expires in 1 day(s)" in lines[endpoint]
    code, out, _ = _validate(config, "--connect", "--format", "json")
    assert code == 0
    results = {entry["endpoint"]: entry for entry in json.loads(out)}
    steps = {name: {s["step"]: s for s in entry["steps"]} for name, entry in results.items()}
    assert steps["out-mqtt"]["auth"]["message"] == "connected and logged in as alice"
    assert steps["out-nats"]["auth"]["result"] == "ok"
    assert steps["out-nats"]["tls"]["result"] == "warning"
    assert [s["step"] for s in results["out-kafka"]["steps"]] == [
        "dns", "tcp", "auth", "destination"]
    assert PASSWORD not in out + err
    assert _validate(config, "--connect", "--strict")[0] == 1


def test_wrong_password_fails_at_the_endpoints_line(
        tmp_path, mqtts, nats_nkey, tansu, pki, topic) -> None:  # type: ignore[no-untyped-def]
    config = _config(tmp_path, mqtts, nats_nkey, tansu, pki, topic, password="wrong")
    code, out, err = _validate(config, "--connect")
    assert code == 1, out + err
    (line,) = [x for x in out.splitlines() if "endpoint 'out-mqtt'" in x]
    assert line.startswith(f"{config}:{_line_of(config, 'out-mqtt')}:3: error: ")
    assert "auth: cannot log in" in line, line
    assert "invalid:" in out


def test_wrong_ca_fails_the_tls_step(tmp_path, mqtts, nats_nkey, tansu, pki, topic) -> None:  # type: ignore[no-untyped-def]
    config = _config(tmp_path, mqtts, nats_nkey, tansu, pki, topic, ca=pki.wrong_ca)
    code, out, _ = _validate(config, "--connect", "--format", "json")
    assert code == 1
    results = {entry["endpoint"]: entry for entry in json.loads(out)}
    for endpoint in ("out-mqtt", "out-nats"):
        entry = results[endpoint]
        assert entry["severity"] == "error" and entry["line"] == _line_of(config, endpoint)
        assert entry["steps"][-1]["step"] == "tls", entry
        assert "does not verify" in entry["steps"][-1]["message"]
    assert results["out-kafka"]["result"] == "ok"


def test_a_wrong_nkey_is_refused_by_the_server(
        tmp_path, mqtts, nats_nkey, tansu, pki, topic) -> None:  # type: ignore[no-untyped-def]
    config = _config(tmp_path, mqtts, nats_nkey, tansu, pki, topic, seed=OTHER_SEED)
    code, out, _ = _validate(config, "--connect")
    assert code == 1
    (line,) = [x for x in out.splitlines() if "endpoint 'out-nats'" in x]
    assert "error: " in line and "auth: cannot log in" in line, line
    assert "authorization" in line.lower(), line


def test_a_missing_topic_is_a_warning_and_strict_fails_it(
        tmp_path, mqtts, nats_nkey, tansu, pki, topic) -> None:  # type: ignore[no-untyped-def]
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    config = _config(tmp_path, mqtts, nats_nkey, tansu, pki, missing)
    code, out, err = _validate(config, "--connect")
    assert code == 0, out + err
    (line,) = [x for x in out.splitlines() if "endpoint 'out-kafka'" in x]
    assert ": warning: " in line and f"topic {missing} does not exist" in line
    code, out, _ = _validate(config, "--connect", "--strict")
    assert code == 1 and "invalid:" in out


def test_strict_fails_a_config_warning(tmp_path, pki) -> None:  # type: ignore[no-untyped-def]
    config = _write(tmp_path, mqtt="mqtts://127.0.0.1:1", nats="tls://127.0.0.1:1",
                    kafka="kafka://127.0.0.1:1", topic="t", password="p", ca=pki.ca,
                    seed=SEED)
    config.write_text(config.read_text() + "  spare-mqtt:\n    uri: mqtt://127.0.0.1:1\n")
    code, out, _ = _validate(config)
    assert code == 0, out
    (line,) = [x for x in out.splitlines() if "spare-mqtt" in x]
    assert f"{config}:{_line_of(config, 'spare-mqtt')}:3: warning: " in line
    code, out, _ = _validate(config, "--strict")
    assert code == 1 and "invalid:" in out


def test_validate_refuses_an_nkey_seed_file_that_does_not_parse(tmp_path, pki) -> None:  # type: ignore[no-untyped-def]
    config = _write(tmp_path, mqtt="mqtts://127.0.0.1:1", nats="tls://127.0.0.1:1",
                    kafka="kafka://127.0.0.1:1", topic="t", password="p", ca=pki.ca,
                    seed="SUNOTASEED")
    code, out, _ = _validate(config)
    assert code == 1
    (line,) = [x for x in out.splitlines() if "nkey_seed_file" in x]
    assert line.startswith(f"{config}:{_line_of(config, 'out-nats')}:3: error: "), line
    assert "no valid NKey seed" in line
    (tmp_path / "user.nk").write_text(SEED + "\n")
    code, out, _ = _validate(config)
    assert code == 0, out


def _webhooks_to_nats(tmp_path: Path, url: str, options: str) -> Path:
    """A config of one route, the HTTP webhooks to the NATS endpoint at `url` with
    `options` (YAML flow mapping); its path."""
    doc = _doc()
    doc["endpoints"] = {"webhooks-http": doc["endpoints"]["webhooks-http"],  # type: ignore[index]
                        "out-nats": doc["endpoints"]["out-nats"]}  # type: ignore[index]
    (tmp_path / "validate.xreg.json").write_text(json.dumps(doc))
    config = tmp_path / "gateway.yaml"
    config.write_text(f"""definitions: [validate.xreg.json]
routes:
  - from: webhooks-http
    to: [out-nats]
deadletter: log
endpoints:
  webhooks-http:
    uri: http://127.0.0.1:{free_port()}
  out-nats:
    uri: {url}
    options: {options}
""")
    return config


def test_a_jetstream_subject_without_a_stream_fails_and_passes_once_created(
        tmp_path, nats_server) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    import nats

    subject = f"validate.js.{uuid.uuid4().hex[:8]}"
    config = _webhooks_to_nats(tmp_path, nats_server.url,
                               f"{{jetstream: true, subject: {subject}}}")
    code, out, _ = _validate(config, "--connect")
    assert code == 1, out
    (line,) = [x for x in out.splitlines() if "endpoint 'out-nats'" in x]
    assert f"destination: no JetStream stream takes subject {subject}" in line, line

    async def create() -> None:
        client = await nats.connect(nats_server.url)
        try:
            await client.jetstream().add_stream(name=f"V{uuid.uuid4().hex[:8]}",
                                                subjects=[subject])
        finally:
            await client.close()

    asyncio.run(create())
    code, out, _ = _validate(config, "--connect")
    assert code == 0, out
    (line,) = [x for x in out.splitlines() if "endpoint 'out-nats'" in x]
    assert f"takes subject {subject}" in line and ": ok: " in line


# ------------------------------------------------------------- NATS operator mode (JWT)


def _b64(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _keypair(prefix: int) -> tuple[str, str, object]:
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    pair = nkeys.from_seed(seed)
    return seed.decode(), pair.public_key.decode(), pair


def _jwt(issuer: object, issuer_public: str, subject: str, nats_claims: dict[str, object]) -> str:
    """A NATS JWT (v2) as `nsc` makes it: ed25519-nkey signed by the issuer's key."""
    import base64
    import hashlib
    import time

    claims: dict[str, object] = {"iat": int(time.time()), "iss": issuer_public,
                                 "name": subject[:8], "sub": subject, "nats": nats_claims,
                                 "jti": ""}
    raw = json.dumps(claims, separators=(",", ":")).encode()
    claims["jti"] = base64.b32encode(hashlib.new("sha512_256", raw).digest()).decode().rstrip(
        "=")
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = issuer.sign(f"{header}.{payload}".encode())  # type: ignore[attr-defined]
    return f"{header}.{payload}.{_b64(signature)}"


def _creds(account: object, account_public: str) -> str:
    seed, public, _ = _keypair(nkeys.PREFIX_BYTE_USER)
    user = _jwt(account, account_public, public, {"pub": {}, "sub": {}, "subs": -1,
                                                  "data": -1, "payload": -1,
                                                  "type": "user", "version": 2})
    return (f"-----BEGIN NATS USER JWT-----\n{user}\n------END NATS USER JWT------\n\n"
            f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n")


@pytest.fixture(scope="module")
def nats_operator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """nats-server in operator mode (decentralized auth, accounts from JWTs): its URL, a
    .creds file of a user of its account, and one of an account it does not trust."""
    import socket
    import time

    from harness.brokers.broker import find_executable

    directory = tmp_path_factory.mktemp("operator")
    _, operator_public, operator = _keypair(nkeys.PREFIX_BYTE_OPERATOR)
    _, account_public, account = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    _, stranger_public, stranger = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    limits = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
              "wildcards": True, "conn": -1, "leaf": -1}
    operator_jwt = _jwt(operator, operator_public, operator_public,
                        {"type": "operator", "version": 2})
    account_jwt = _jwt(operator, operator_public, account_public,
                       {"limits": limits, "type": "account", "version": 2})
    port = free_port()
    (directory / "nats.conf").write_text(
        f"listen: 127.0.0.1:{port}\noperator: {operator_jwt}\nresolver: MEMORY\n"
        f"resolver_preload: {{\n  {account_public}: {account_jwt}\n}}\n")
    (directory / "user.creds").write_text(_creds(account, account_public))
    (directory / "stranger.creds").write_text(_creds(stranger, stranger_public))
    exe = find_executable("nats-server", "/usr/sbin/nats-server", env_var="XRGW_NATS_BIN")
    with (directory / "nats.log").open("w") as log:
        process = subprocess.Popen([exe, "-c", str(directory / "nats.conf")], stdout=log,
                                   stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:  # until it accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, (directory / "nats.log").read_text()
                assert time.monotonic() < deadline, "nats-server did not start"
                time.sleep(0.1)
        yield (f"nats://127.0.0.1:{port}", str(directory / "user.creds"),
               str(directory / "stranger.creds"))
    finally:
        process.terminate()
        process.wait(10)


def test_operator_mode_creds_log_in_and_an_untrusted_account_is_refused(
        tmp_path, nats_operator) -> None:  # type: ignore[no-untyped-def]
    url, creds, stranger = nats_operator
    config = _webhooks_to_nats(tmp_path, url, f"{{creds_file: {creds}}}")
    code, out, err = _validate(config, "--connect")
    assert code == 0, out + err
    (line,) = [x for x in out.splitlines() if "endpoint 'out-nats'" in x]
    assert ": ok: " in line and "connected and logged in" in line, line
    _webhooks_to_nats(tmp_path, url, f"{{creds_file: {stranger}}}")
    code, out, _ = _validate(config, "--connect")
    assert code == 1, out
    (line,) = [x for x in out.splitlines() if "endpoint 'out-nats'" in x]
    assert "auth: cannot log in" in line, line
