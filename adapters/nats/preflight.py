"""`validate --connect` for NATS: a JetStream stream takes the endpoint's subject."""

from __future__ import annotations

from adapters._preflight import Finding, why
from gateway.ports import AdapterEndpoint, Producer


async def jetstream_streams(producer: Producer, endpoint: AdapterEndpoint) -> list[Finding]:
    """JetStream endpoints: a stream takes the endpoint's subject (a publish to a subject
    no stream takes is refused by the server: "no responders"). Core NATS needs nothing."""
    client = getattr(producer, "_client", None)
    opts = getattr(producer, "_opts", None)
    if client is None or opts is None or not getattr(opts, "jetstream", False):
        return []
    subject = endpoint.options.get("subject")
    stream = getattr(opts, "stream", None)
    if stream:
        try:
            await client.jetstream().stream_info(stream)
        except Exception as exc:
            return [Finding("destination", "error", f"stream {stream}: {why(exc)}",
                            f"create the stream {stream}, or check its name")]
        return [Finding("destination", "ok", f"stream {stream} exists")]
    if not isinstance(subject, str) or not subject or "{" in subject:
        return []
    try:
        name = await client.jetstream().find_stream_name_by_subject(subject)
    except Exception:
        return [Finding("destination", "error", f"no JetStream stream takes subject {subject}",
                        f"create a stream whose subjects include {subject}")]
    return [Finding("destination", "ok", f"stream {name} takes subject {subject}")]
