"""The machinery of the fault scenarios (tests/integration/test_faults.py, `make fault`):
the gateway as a real child process, the route configs the scenarios share, publishers
and readers of numbered messages (`{"seq": N}`) for every protocol, an HTTP sink, and
the bookkeeping that turns arrivals into a sent/delivered/duplicates/dead-lettered/lost
row (`scripts/fault_report.py` prints one table of them).

    tally.py            Tally: arrivals by sequence number
    report.py           the result row: printed, appended to $XRGW_FAULT_REPORT, tabled
    waiting.py          until / until_async / patience: polling with a deadline
    gateway_process.py  GatewayProcess: `python -m gateway.cli run -c`, killed and restarted
    route_config.py     the gateway configs (faults.xreg.json + endpoint overrides)
    publishers.py       numbered messages into MQTT, Kafka, JetStream, AMQP, HTTP
    readers.py          counting what arrived on Kafka and JetStream
    sinks.py            SlowSink: an HTTP sink that counts and can be slow
    proxy.py            FaultProxy: a TCP proxy that blackholes, resets, refuses, delays
    schedule.py         play(): blackhole, resets, heal through a FaultProxy; ReadyzWatch
"""
