"""Payload schemas: compile a definition's resolved schema into a validator of message
bodies. (Resolving `dataschemauri`/`dataschema` to a `SchemaDocument` is the definitions
stage's: `gateway.definitions.schema_refs`.)

    fetch      registry/schema URLs, fetched once per load and cached
    compile    `SchemaDocument` -> `PayloadValidator` (JSON Schema, Avro, Protobuf)
    enforce    the per-route policy: off, tiebreak, enforce
"""
