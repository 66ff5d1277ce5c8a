"""`schema: enforce` end to end through a real NATS server.

One gateway (in process): NATS `orders.<sfx>.>` -> NATS `orders.out.<sfx>`, dead letter on
NATS `orders.dlq.<sfx>`, definitions `tests/data/schemas/orders.xreg.json` (JSON Schema of
the same document, Avro by XID, a JSON Schema 2020-12 file next to it). A conforming
order is delivered as a CloudEvent; an order with a negative amount, a refund missing a
field and a note too long are dead-lettered with reason `invalid-data`, the validator's
error path as the detail, and counted per definition in the metrics.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import nats

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway

TIMEOUT = 30.0
DATA = Path(__file__).resolve().parents[1] / "data" / "schemas"

#: (subject tail, body, expected dead-letter detail or None when delivered)
CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("placed.s1", {"amount": 3, "sku": "a"}, None),
    ("placed.s2", {"amount": -3, "sku": "a"}, "$.amount: -3 is less than the minimum of 0"),
    ("refund.s1", {"order": "o-1"}, "$.cents: None is not a valid long"),
    ("note.s1", {"text": "this note is far too long"}, None),  # detail checked below
    ("refund.s2", {"order": "o-2", "cents": 5}, None),
]


def _config(tmp: Path, sfx: str, url: str) -> Path:
    for name in ("orders.xreg.json", "note.schema.json"):
        (tmp / name).write_text((DATA / name).read_text().replace("__SFX__", sfx))
    config = {
        "definitions": ["orders.xreg.json"],
        "routes": [{"from": "orders-in", "to": ["orders-out"], "schema": "enforce"}],
        "deadletter": "orders-dlq",
        "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "error"},
        "shutdown": {"grace": "5s"},
        "endpoints": {name: {"uri": url} for name in ("orders-in", "orders-out", "orders-dlq")},
    }
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config, indent=1))
    return path


def test_enforce_dead_letters_invalid_data(tmp_path: Path, nats_server: Any) -> None:
    sfx = uuid.uuid4().hex[:8]
    config, problems = load_config(_config(tmp_path, sfx, nats_server.url))
    assert config is not None, [str(p) for p in problems if p.is_error]

    async def scenario() -> tuple[list[Any], list[Any], str]:
        gateway = Gateway(config, REGISTRY)
        nc = await nats.connect(nats_server.url)
        out: list[Any] = []
        dead: list[Any] = []

        async def on_out(msg: Any) -> None:
            out.append(msg)

        async def on_dead(msg: Any) -> None:
            dead.append(msg)

        await nc.subscribe(f"orders.out.{sfx}", cb=on_out)
        await nc.subscribe(f"orders.dlq.{sfx}", cb=on_dead)
        await nc.flush()
        await gateway.start()
        try:
            async with asyncio.timeout(TIMEOUT):
                while not all(gateway.readiness().values()):
                    await asyncio.sleep(0.05)
            for tail, body, _ in CASES:
                await nc.publish(f"orders.{sfx}.{tail}", json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
            await nc.flush()
            async with asyncio.timeout(TIMEOUT):
                while len(out) < 2 or len(dead) < 3:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # anything extra would arrive now
            metrics = gateway.metrics.render().decode()
        finally:
            await gateway.stop()
            await nc.close()
        return out, dead, metrics

    out, dead, metrics = asyncio.run(scenario())
    delivered = sorted(json.loads(m.data)["amount" if b"amount" in m.data else "cents"]
                       for m in out)
    assert delivered == [3, 5]
    assert all(m.headers["ce-type"].startswith("com.example.order.") for m in out)
    letters = {json.dumps(json.loads(m.data), sort_keys=True): m.headers for m in dead}
    assert len(dead) == 3
    for _tail, body, detail in CASES[1:4]:
        headers = letters[json.dumps(body, sort_keys=True)]
        assert headers["xrgw-reason"] == "invalid-data"
        if detail is not None:
            assert headers["xrgw-detail"] == detail
        else:
            assert headers["xrgw-detail"].startswith("$.text: 'this note is far too long'")
    for message, count in (("placed", 1), ("refund", 1), ("note", 1)):
        assert (f'xrgw_messages_invalid_data_total{{endpoint="orders-in",'
                f'message="/messagegroups/orders/messages/{message}",'
                f'xrgw_endpoint="orders-in"}} {count}.0') in metrics
    assert 'xrgw_messages_deadlettered_total{reason="invalid-data"} 3.0' in metrics
