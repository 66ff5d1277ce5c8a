"""JSON as the gateway handles it.

    values   the `JSON` type aliases and narrowing of values read back
    text     JSON text that can always be written out as UTF-8
    body     parsing a received body: `json.loads`'s answer at orjson's speed
"""
