"""The engine's behaviour as the operator sets it: values the config builds and the engine
reads, kept below both so the config does not import the engine.

    retry      `RetryPolicy` (`routes[].retry`)
    readiness  `ReadinessPolicy` (`admin.readiness`)
    schema     `SchemaPolicy` (`routes[].schema`)
"""
