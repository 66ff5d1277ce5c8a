"""The baseline of `bench_latency`: a plain MQTT 5 -> Kafka bridge on the raw client libraries.

Not a test: `bench_latency` starts it as a child process in place of the gateway, so both
subjects see the same brokers, publisher, rate and reader. It keeps the gateway's delivery
contract, or the comparison would flatter it: QoS 1 subscription, manual acknowledgement,
and a message is acknowledged only once Kafka confirmed its record (aiokafka with
`acks=all` and the gateway's default `linger_ms` 5), and the same MQTT 5 Receive
Maximum as the gateway's source (1,000). No matching, no envelope: the body is
forwarded as is, without key or headers.

    python -m bench.latency_passthrough --mqtt 127.0.0.1:1883 --filter 'lat/1/dev/+' \
        --kafka 127.0.0.1:9092 --topic out-1

It prints `ready` once subscribed and the producer is up, and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import paho.mqtt.client as paho
from aiokafka import AIOKafkaProducer
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


async def bridge(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    producer = AIOKafkaProducer(bootstrap_servers=args.kafka, acks="all",
                                linger_ms=args.linger_ms)
    await producer.start()
    subscribed = asyncio.Event()
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=args.client_id,
                         protocol=MQTTProtocolVersion.MQTTv5, manual_ack=True)

    received: list[tuple[bytes | bytearray, int]] = []
    wake = asyncio.Event()

    def on_message(_c: paho.Client, _u: object, msg: paho.MQTTMessage) -> None:
        received.append((msg.payload, msg.mid))
        wake.set()

    async def forward() -> None:
        # One task drains what paho received, in order; a message is acknowledged once
        # Kafka confirmed its record.
        while True:
            await wake.wait()
            wake.clear()
            while received:
                burst = received[:]
                del received[:len(burst)]
                for payload, mid in burst:
                    confirmed = await producer.send(args.topic, payload)
                    confirmed.add_done_callback(lambda _f, mid=mid: client.ack(mid, 1))

    # paho runs on the event loop (its sockets watched by the loop), as the gateway's MQTT
    # link does: a paho thread would contend for the GIL with the producer's loop.
    client.on_socket_open = lambda c, _u, sock: loop.add_reader(sock, c.loop_read)
    client.on_socket_close = lambda _c, _u, sock: loop.remove_reader(sock)
    client.on_socket_register_write = lambda c, _u, sock: loop.add_writer(sock, c.loop_write)
    client.on_socket_unregister_write = lambda _c, _u, sock: loop.remove_writer(sock)
    client.on_message = on_message
    client.on_subscribe = lambda *_a: subscribed.set()
    host, port = args.mqtt.rsplit(":", 1)
    # The gateway's MQTT 5 source asks for a Receive Maximum of its window (1,000 by
    # default); without it Mosquitto holds a client to its max_inflight_messages (20).
    connect = Properties(PacketTypes.CONNECT)
    connect.ReceiveMaximum = args.receive_maximum
    client.connect(host, int(port), properties=connect)
    client.subscribe(args.filter, qos=1)

    async def housekeeping() -> None:  # paho's keep-alive and retries
        while True:
            await asyncio.sleep(1)
            client.loop_misc()

    misc = asyncio.ensure_future(housekeeping())
    forwarding = asyncio.ensure_future(forward())
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await asyncio.wait_for(subscribed.wait(), 30)
        print("ready", flush=True)
        await stop.wait()
    finally:
        forwarding.cancel()
        misc.cancel()
        client.disconnect()
        await producer.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mqtt", required=True, help="host:port")
    p.add_argument("--filter", required=True, help="MQTT topic filter to subscribe")
    p.add_argument("--kafka", required=True, help="bootstrap servers")
    p.add_argument("--topic", required=True, help="Kafka topic to write")
    p.add_argument("--client-id", default="lat-passthrough")
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--receive-maximum", type=int, default=1000)
    asyncio.run(bridge(p.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
