"""Two gateways on one MQTT 5 shared subscription, one of them SIGKILLed.

Measured on 62d9be0 (mosquitto 2.0): the dead member's persistent session (expiry 24 h by
default) kept receiving its share of every new message, 2,000 of 10,000, until a process
with the same client id came back, which a Deployment's new pod never does. A shared
subscription's session now ends with the connection unless the operator set an expiry
(adapters/mqtt/options.py `_session`), so the broker gives every later message to the survivors.
What mosquitto cannot do is hand the dead member's unacknowledged messages (at most its
`max_in_flight`) to the others: it drops them with the session (docs/deployment.md).
"""

from __future__ import annotations

import asyncio
import uuid

from harness.brokers import Mosquitto, Tansu, free_port
from harness.faults.gateway_process import gateway_process
from harness.faults.publishers import publish
from harness.faults.readers import KafkaReader, create_topics, read_kafka
from harness.faults.report import report
from harness.faults.route_config import RECEIVE_MAX, write_route_config
from harness.faults.tally import Tally
from harness.faults.waiting import patience, until

BEFORE, AFTER = 200, 2_000


def test_a_killed_members_share_goes_to_the_survivor(mosquitto: Mosquitto, tansu: Tansu,
                                                     tmp_path) -> None:
    run = uuid.uuid4().hex[:8]
    topic, dead_topic = f"shared-{run}", f"shared-dead-{run}"
    ports = [free_port(), free_port()]
    configs = []
    for member, port in enumerate(ports):
        folder = tmp_path / f"member{member}"
        folder.mkdir()
        configs.append(write_route_config(
            folder, name=f"shared-{member}",
            source=("faults-mqtt", {
                "uri": mosquitto.url, "client_id": f"xrgw-shared-{run}-{member}",
                "options": {"topicfilter": f"/faults/{run}/+", "sharedsubscriptiongroup": run,
                            "max_in_flight": RECEIVE_MAX}}),
            outputs={"faults-kafka": {"uri": tansu.url, "options": {"topic": topic}}},
            deadletter=("faults-deadletter", {"uri": tansu.url,
                                              "options": {"topic": dead_topic}}),
            admin_port=port))
    before, after = range(BEFORE), range(BEFORE, BEFORE + AFTER)

    async def scenario() -> tuple[Tally, Tally]:
        await create_topics(tansu, topic, dead_topic)
        live = KafkaReader(tansu, topic)
        watching = asyncio.create_task(live.run())
        with gateway_process(configs[0], ports[0]) as first, \
                gateway_process(configs[1], ports[1]) as second:
            first.start()
            second.start()
            await first.wait_ready(60)
            await second.wait_ready(60)
            await asyncio.to_thread(publish, mosquitto, run, before)
            await until(lambda: not live.tally.missing(before), patience(BEFORE),
                        lambda: f"{live.tally.unique} of {BEFORE} before the kill")
            first.kill()
            await asyncio.to_thread(publish, mosquitto, run, after)
            await until(lambda: not live.tally.missing(after), patience(AFTER),
                        lambda: f"{len(after) - len(live.tally.missing(after))} of {AFTER} "
                                "published after the kill arrived")
            live.stop()
            await watching
            delivered = await read_kafka(tansu, topic, expect=range(BEFORE + AFTER))
            dead = await read_kafka(tansu, dead_topic, expect=None, quiet=0.5)
        return delivered, dead

    delivered, dead = asyncio.run(scenario())
    result = report("shared subscription, one member SIGKILLed", range(BEFORE + AFTER),
                    delivered, dead, "every message published after the kill arrived")
    assert result.lost == 0
