"""`xrgw tap`: a live, sampled, redacted stream of what a running gateway's routes do.

    item      `Tapped`: one message's outcome as a route hands it over (no copy, no JSON)
    filter    `TapFilter` (route, definition, outcome) and `Sampler` (a rate, exactly)
    hub       `TapHub`: the one thing a route calls, `offer_batch`, when `attached`;
              per subscriber a bounded queue that drops (and counts) instead of waiting
    line      a tapped message as the stream's JSON line, redacted as the route says
    endpoint  `/tap` on the admin server's sample pages: NDJSON or server-sent events
    client    reads a gateway's `/tap` stream (`xrgw tap URL`)
    text      the lines for a terminal (`xrgw tap --format text`)

The cost when nobody taps is one attribute check per batch (`TapHub.attached`); with a
tap attached, the route builds one small tuple per message of a route some tap wants and
appends it to a bounded deque: the JSON, the redaction and the writing happen in the
admin server's task, off the route's path, and a reader that falls behind loses lines
(counted in `xrgw_tap_dropped_total` and in the stream), never slows the route.
"""
