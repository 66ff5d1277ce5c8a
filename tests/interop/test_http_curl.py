"""HTTP with curl: a gzip-encoded body, a chunked body, `Expect: 100-continue`, a
CloudEvents batch (`application/cloudevents-batch+json`), and the same gone wrong (a
corrupt gzip body, a batch that is not one). Each is converted (2xx, and the events on
NATS), or refused / dead-lettered with a clear reason; the route goes on."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from interop_gateway import RunningGateway, ce_data, interop_gateway, reason

from harness.brokers import NatsServer, free_port

RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def base(nats_server: NatsServer, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[str, RunningGateway]]:
    port = free_port()
    with interop_gateway(
            tmp_path_factory.mktemp("interop-http"), nats_server.url,
            routes=[{"from": "interop-http-in", "to": ["interop-nats-out"]}],
            endpoints={"interop-http-in": {"uri": f"http://127.0.0.1:{port}"}},
    ) as running:
        yield f"http://127.0.0.1:{port}/interop/{RUN}", running


def curl(url: str, body: bytes, *args: str, tmp: Path) -> tuple[int, str, str]:
    """POST `body` (from a file, as a user's curl would send it); (status, response
    body, curl's verbose trace)."""
    exe = shutil.which("curl")
    if exe is None:
        pytest.fail("curl is not installed: run scripts/install-system-deps.sh")
    data = tmp / f"body-{uuid.uuid4().hex[:8]}"
    data.write_bytes(body)
    done = subprocess.run(
        [exe, "-sS", "-v", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}",
         "--data-binary", f"@{data}", *args, url],
        capture_output=True, timeout=90)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    text, _, status = done.stdout.decode(errors="replace").rpartition("\n")
    return int(status), text, done.stderr.decode(errors="replace")


JSON = ("-H", "Content-Type: application/json")


def test_gzip_encoded_body(base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    url, gateway = base
    body = json.dumps({"t": 21.5, "pad": "x" * 4000}).encode()
    status, _, _ = curl(f"{url}/gzip", gzip.compress(body), *JSON,
                        "-H", "Content-Encoding: gzip", tmp=tmp_path)
    assert 200 <= status < 300
    kind, msg = gateway.outcome("gzip", lambda m: False)
    assert kind == "event" and ce_data(msg) == json.loads(body)
    assert "content-encoding" not in {k.lower() for k in msg.headers}  # decoded, not labelled


def test_a_corrupt_gzip_body_is_refused_with_a_reason(base: tuple[str, RunningGateway],
                                                      tmp_path: Path) -> None:
    url, gateway = base
    broken = gzip.compress(b'{"t": 1}')[:-6] + b"\x00garbage"
    status, text, _ = curl(f"{url}/gzip-corrupt", broken, *JSON,
                           "-H", "Content-Encoding: gzip", tmp=tmp_path)
    assert status == 400, (status, text)
    assert text.strip(), "a 400 says what was wrong"
    assert gateway.seen.event("gzip-corrupt") is None


def test_chunked_body(base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    url, gateway = base
    body = json.dumps({"t": 22, "pad": "y" * 100_000}).encode()
    status, _, trace = curl(f"{url}/chunked", body, *JSON,
                            "-H", "Transfer-Encoding: chunked", tmp=tmp_path)
    assert 200 <= status < 300
    assert "transfer-encoding: chunked" in trace.lower()
    kind, msg = gateway.outcome("chunked", lambda m: False)
    assert kind == "event" and ce_data(msg) == json.loads(body)


def test_expect_100_continue(base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    url, gateway = base
    body = json.dumps({"t": 23, "pad": "z" * 200_000}).encode()
    status, _, trace = curl(f"{url}/expect", body, *JSON, "-H", "Expect: 100-continue",
                            tmp=tmp_path)
    assert 200 <= status < 300
    assert "100 Continue" in trace  # the gateway asked for the body, curl did not guess
    kind, msg = gateway.outcome("expect", lambda m: False)
    assert kind == "event" and ce_data(msg) == json.loads(body)


def _event(subject: str, data: object) -> dict[str, object]:
    return {"specversion": "1.0", "id": f"{subject}-{uuid.uuid4().hex[:6]}",
            "type": "com.example.interop.event", "source": f"/interop/{RUN}",
            "subject": subject, "datacontenttype": "application/json", "data": data}


def test_cloudevents_batch(base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    url, gateway = base
    batch = [_event(f"batch-{n}", {"n": n}) for n in range(3)]
    status, text, _ = curl(f"{url}/events", json.dumps(batch).encode(),
                           "-H", "Content-Type: application/cloudevents-batch+json",
                           tmp=tmp_path)
    assert 200 <= status < 300, text
    for n in range(3):
        kind, msg = gateway.outcome(f"batch-{n}", lambda m: False)
        assert kind == "event" and ce_data(msg) == {"n": n}
        assert msg.headers["ce-type"] == "com.example.interop.event"


def test_a_gzip_encoded_cloudevents_batch(base: tuple[str, RunningGateway],
                                          tmp_path: Path) -> None:
    url, gateway = base
    batch = [_event(f"gzbatch-{n}", {"n": n}) for n in range(2)]
    status, text, _ = curl(f"{url}/events", gzip.compress(json.dumps(batch).encode()),
                           "-H", "Content-Type: application/cloudevents-batch+json",
                           "-H", "Content-Encoding: gzip", tmp=tmp_path)
    assert 200 <= status < 300, text
    for n in range(2):
        kind, msg = gateway.outcome(f"gzbatch-{n}", lambda m: False)
        assert kind == "event" and ce_data(msg) == {"n": n}


def test_a_batch_that_is_not_one_is_refused_or_dead_lettered(
        base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    """A batch content type over a JSON object (not an array), and a batch with an
    element that is not a CloudEvent: answered 4xx with a reason, or dead-lettered with
    one; never a stall."""
    url, gateway = base
    for name, body in (("not-an-array", json.dumps(_event("x", 1)).encode()),
                       ("bad-element", json.dumps([{"specversion": "1.0",
                                                    "marker": f"bad-{RUN}"}]).encode())):
        status, text, _ = curl(f"{url}/events", body,
                               "-H", "Content-Type: application/cloudevents-batch+json",
                               tmp=tmp_path)
        if 400 <= status < 500:
            assert text.strip(), (name, "a refusal says why")
            continue
        assert 200 <= status < 300, (name, status, text)
        kind, dead = gateway.outcome("never", lambda m, body=body: m.data == body)
        assert kind == "dead" and reason(dead), name


def test_the_route_goes_on_after_every_case(base: tuple[str, RunningGateway],
                                            tmp_path: Path) -> None:
    url, gateway = base
    status, _, _ = curl(f"{url}/after", b'{"after": true}', *JSON, tmp=tmp_path)
    assert 200 <= status < 300
    kind, _ = gateway.outcome("after", lambda m: False)
    assert kind == "event"


def test_a_percent_encoded_path(base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    """curl sends the path as given; the gateway matches and renders it decoded."""
    url, gateway = base
    status, text, _ = curl(f"{url}/Ger%C3%A4t%207", b'{"t": 1}', *JSON, tmp=tmp_path)
    assert 200 <= status < 300, text
    kind, msg = gateway.outcome("Gerät 7", lambda m: False)
    assert kind == "event" and ce_data(msg) == {"t": 1}


def test_deflate_encoded_body(base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    url, gateway = base
    status, text, _ = curl(f"{url}/deflate", zlib.compress(b'{"t": 2}'), *JSON,
                           "-H", "Content-Encoding: deflate", tmp=tmp_path)
    assert 200 <= status < 300, text
    kind, msg = gateway.outcome("deflate", lambda m: False)
    assert kind == "event" and ce_data(msg) == {"t": 2}


def test_a_binary_mode_cloudevent(base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    """A webhook sender's CloudEvent: attributes in ce- headers, a percent-encoded
    non-ASCII subject (the HTTP binding's rule)."""
    url, gateway = base
    status, text, _ = curl(f"{url}/events", b'{"n": 7}', *JSON,
                           "-H", "ce-specversion: 1.0", "-H", f"ce-id: bin-{RUN}",
                           "-H", "ce-type: com.example.interop.event",
                           "-H", f"ce-source: /interop/{RUN}",
                           "-H", "ce-subject: binary-%C3%BC", tmp=tmp_path)
    assert 200 <= status < 300, text
    kind, msg = gateway.outcome("binary-ü", lambda m: False)
    assert kind == "event" and ce_data(msg) == {"n": 7}


def test_a_structured_mode_cloudevent(base: tuple[str, RunningGateway],
                                      tmp_path: Path) -> None:
    url, gateway = base
    status, text, _ = curl(f"{url}/events", json.dumps(_event("structured", {"n": 8})).encode(),
                           "-H", "Content-Type: application/cloudevents+json; charset=utf-8",
                           tmp=tmp_path)
    assert 200 <= status < 300, text
    kind, msg = gateway.outcome("structured", lambda m: False)
    assert kind == "event" and ce_data(msg) == {"n": 8}


def test_a_chunked_body_over_the_limit_is_refused(base: tuple[str, RunningGateway],
                                                  tmp_path: Path) -> None:
    """A chunked body announces no length: the limit (`max_body_bytes`, 1 MiB by default)
    holds while it streams in, with 413."""
    url, gateway = base
    body = json.dumps({"pad": "q" * (2 * 1024 * 1024)}).encode()
    status, text, _ = curl(f"{url}/too-big", body, *JSON, "-H", "Transfer-Encoding: chunked",
                           tmp=tmp_path)
    assert status == 413, (status, text[:200])
    assert gateway.seen.event("too-big") is None


def test_a_gzip_body_that_inflates_over_the_limit_is_refused(
        base: tuple[str, RunningGateway], tmp_path: Path) -> None:
    """32 MiB of zeros gzip to ~32 KiB: the limit applies to the decoded body, so the
    request is refused (413 or 400), not inflated into memory and published."""
    url, gateway = base
    bomb = gzip.compress(b"0" * (32 * 1024 * 1024))
    assert len(bomb) < 100_000
    status, text, _ = curl(f"{url}/bomb", bomb, *JSON, "-H", "Content-Encoding: gzip",
                           tmp=tmp_path)
    assert status in (400, 413), (status, text[:200])
    assert gateway.seen.event("bomb") is None
