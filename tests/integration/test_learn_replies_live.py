"""`xrgw learn -c CONFIG --endpoint ID` from real NATS request-reply traffic: a nats-py
requester asks, a nats-py service answers on the reply subject; the observed endpoint
covers both the requests and the requesters' inboxes, and the draft gets the request's
definition and its reply definition `X.reply`, linked by `correlationid`, that match
what was sent and answered."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import nats
from test_learn_live import _config, _finish, _start_learn

from gateway.cli import main

ITEMS = ("tea", "jam", "rye")
REQUESTS = 12


async def _traffic(url: str, sfx: str) -> list[tuple[Any, Any]]:
    """REQUESTS requests answered by a service; (request subject and body, answer)."""
    service = await nats.connect(url)
    asker = await nats.connect(url)

    async def answer(msg: Any) -> None:
        asked = json.loads(msg.data)
        await service.publish(msg.reply, json.dumps({"item": asked["item"], "price": 4}).encode(),
                              headers={"content-type": "application/json"})

    await service.subscribe(f"rr.{sfx}.*.ask", cb=answer)
    await service.flush()
    pairs = []
    for n in range(REQUESTS):
        item = ITEMS[n % len(ITEMS)]
        msg = await asker.request(f"rr.{sfx}.{item}.ask", json.dumps({"item": item}).encode(),
                                  timeout=30, headers={"content-type": "application/json"})
        pairs.append(((f"rr.{sfx}.{item}.ask", item), json.loads(msg.data)))
    await asker.close()
    await service.close()
    return pairs


def test_learn_proposes_the_reply_definition_from_live_nats_requests(
        tmp_path: Path, nats_server: Any, capsys: Any) -> None:
    sfx = uuid.uuid4().hex[:8]
    config = _config(tmp_path, "NATS", {"subject": f"rr.{sfx}.{{item}}.ask"},
                     {"uri": nats_server.url,
                      "options": {"subjectfilter": [f"rr.{sfx}.*.ask", "_INBOX.>"]}})
    draft = tmp_path / "draft.xreg.json"
    proc = _start_learn("-c", config, "--endpoint", "source", "--count", str(2 * REQUESTS),
                        "--for", "2m", "-o", str(draft), "--format", "json")
    try:
        pairs = asyncio.run(_traffic(nats_server.url, sfx))
        summary, err = _finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert all(answer["item"] == item for (_, item), answer in pairs)
    assert summary["messages"] == 2 * REQUESTS, err
    assert summary["answers"] == REQUESTS
    [request] = summary["definitions"]
    assert request["address"] == f"rr.{sfx}.{{item}}.ask"
    [reply] = summary["replies"]
    assert (reply["request"], reply["answers"]) == (request["id"], REQUESTS)
    assert reply["id"] == f"{request['id']}.reply"

    document = json.loads(draft.read_text())
    groups = document["messagegroups"]
    assert list(groups["learned"]["messages"]) == [request["id"]]
    assert list(groups["learned.replies"]["messages"]) == [reply["id"]]
    assert reply["reply_definition"] == f"learned.replies/{reply['id']}"
    messages = {**groups["learned"]["messages"], **groups["learned.replies"]["messages"]}
    asked, answered = messages[request["id"]], messages[reply["id"]]
    assert "correlationid" in asked["envelopemetadata"]
    assert "correlationid" in answered["envelopemetadata"]
    assert asked["protocoloptions"]["reply-to"] == "{replyto}"
    assert answered["protocoloptions"]["headers"] == [
        {"name": "content-type", "value": "application/json"}]
    assert main(["validate", str(draft)]) == 0, capsys.readouterr()
