"""Native records for the learner's tests."""

from __future__ import annotations

from gateway.json.values import JSON
from gateway.record import NativeMessage


def mqtt(topic: str, data: JSON = None, **fields: JSON) -> NativeMessage:
    if data is None:
        return NativeMessage("MQTT/5.0", {"topic_name": topic, **fields}, payload=b"21.5")
    return NativeMessage("MQTT/5.0", {"topic_name": topic, **fields}, data=data)


def kafka(topic: str, key: str, headers: dict[str, str], data: JSON) -> NativeMessage:
    pairs: list[JSON] = [{"name": n, "value": v} for n, v in headers.items()]
    return NativeMessage("KAFKA", {"topic": topic, "key": key, "headers": pairs}, data=data)


def store_traffic(stores: int = 30, desks: int = 6) -> list[NativeMessage]:
    """/store/{storeid}/cashierdesk/{desk}/{kind}, the body carrying storeid."""
    out = []
    for store in range(1, stores + 1):
        for desk in range(1, desks + 1):
            for kind in ("sale", "refund", "open"):
                out.append(mqtt(f"/store/{store}/cashierdesk/{desk}/{kind}",
                                {"storeid": str(store), "amount": store * 1.5}, qos=1))
    return out
