"""The daemon with in-memory adapters: reload on file change, on registry change, and a
broken config rejected while the running one keeps serving."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.config import load_config
from gateway.daemon import Gateway

ROOT = Path(__file__).resolve().parents[3]
STORE = json.loads((ROOT / "config/examples/store.xreg.json").read_text())


class MemoryFactory:
    def __init__(self):
        self.consumers = []

    def consumer(self, endpoint):
        consumer = MemoryConsumer()
        self.consumers.append(consumer)
        return consumer

    def producer(self, endpoint):
        return MemoryProducer()

    def output_defaults(self, endpoint):
        return {}


def write_config(tmp: Path, definitions: str) -> Path:
    config = tmp / "gateway.yaml"
    config.write_text(f"""
definitions: [{definitions}]
routes: [{{from: store-mqtt, to: [events-kafka]}}]
deadletter: log
admin: {{listen: "127.0.0.1:0"}}
""")
    return config


def test_reload_on_file_change_and_broken_config_rejected(tmp_path):
    (tmp_path / "store.xreg.json").write_text(json.dumps(STORE))
    path = write_config(tmp_path, "store.xreg.json")
    config, problems = load_config(path)
    assert config is not None, problems

    async def scenario():
        factory = MemoryFactory()
        gateway = Gateway(config, factory)
        await gateway.start()
        watcher = asyncio.create_task(gateway._watch(interval=0.05))
        try:
            first_routes = gateway.routes
            changed = json.loads(json.dumps(STORE))
            changed["messagegroups"]["store"]["messages"]["extra"] = {
                "protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/x/{y}"},
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {"type": {"value": "x"}, "source": {"value": "y"}}}
            (tmp_path / "store.xreg.json").write_text(json.dumps(changed))
            async with asyncio.timeout(5):
                while not gateway._reload.is_set():
                    await asyncio.sleep(0.02)
            gateway._reload.clear()
            assert await gateway.reload()
            assert gateway.routes is not first_routes
            assert len(gateway.routes[0].converter.matcher) == 3
            path.write_text("routes: [\n")  # broken
            assert await gateway.reload() is False
            assert len(gateway.routes[0].converter.matcher) == 3  # still serving
            text = gateway.metrics.render().decode()
            assert 'xrgw_config_reloads_total{result="ok"} 1.0' in text
            assert 'xrgw_config_reloads_total{result="rejected"} 1.0' in text
        finally:
            watcher.cancel()
            await gateway.stop()

    asyncio.run(scenario())


def test_polled_registry_change_triggers_reload_and_garbage_does_not(tmp_path):
    state = {"doc": STORE, "served": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            state["served"] += 1
            body = state["doc"] if isinstance(state["doc"], bytes) else json.dumps(
                state["doc"]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    path = write_config(tmp_path, f"{{url: '{url}', poll: 100ms}}")
    config, problems = load_config(path)
    assert config is not None, [str(p) for p in problems]

    async def scenario():
        gateway = Gateway(config, MemoryFactory())
        await gateway.start()
        watcher = asyncio.create_task(gateway._watch(interval=0.05))

        async def polled_twice_more() -> None:
            # The poll after next has begun: the next one's answer was taken in (waiting on
            # polls, not on time: under load 0.4 s was not always one poll).
            until = state["served"] + 2
            async with asyncio.timeout(30):
                while state["served"] < until:
                    await asyncio.sleep(0.02)

        try:
            await polled_twice_more()  # the first poll records the digest
            assert not gateway._reload.is_set()
            state["doc"] = b"<html>not a registry</html>"
            await polled_twice_more()
            assert not gateway._reload.is_set()  # garbage never replaces a working config
            changed = json.loads(json.dumps(STORE))
            changed["messagegroups"]["store"]["description"] = "changed"
            state["doc"] = changed
            async with asyncio.timeout(30):
                while not gateway._reload.is_set():
                    await asyncio.sleep(0.02)
        finally:
            watcher.cancel()
            await gateway.stop()
            server.shutdown()

    asyncio.run(scenario())


def test_the_catalog_leaves_the_collector_before_any_route_starts(tmp_path, monkeypatch):
    """settle_heap's full collection walks the whole catalog (0.86 s at 10,000
    definitions): done after the start it held the event loop while an HTTP source was
    listening and its outputs not yet connected, so senders got 503 meanwhile. After the
    start only the new objects are frozen."""
    from gateway import daemon
    from gateway.runtime.route import Route

    (tmp_path / "store.xreg.json").write_text(json.dumps(STORE))
    config, problems = load_config(write_config(tmp_path, "store.xreg.json"))
    assert config is not None, problems
    calls: list[str] = []
    monkeypatch.setattr(daemon, "settle_heap", lambda: calls.append("settle_heap"))
    monkeypatch.setattr(daemon, "freeze_new", lambda: calls.append("freeze_new"))
    original = Route.start

    async def start(self):
        calls.append("route start")
        await original(self)

    monkeypatch.setattr(Route, "start", start)

    async def scenario():
        gateway = Gateway(config, MemoryFactory())
        running = asyncio.create_task(gateway.run())
        async with asyncio.timeout(30):
            while "freeze_new" not in calls:
                await asyncio.sleep(0.01)
        gateway.request_stop()
        return await running

    assert asyncio.run(scenario()) == 0
    assert calls == ["settle_heap", "route start", "freeze_new"]
