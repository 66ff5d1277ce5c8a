"""Payload schemas: resolve a definition's `dataschemauri`/`dataschema` to a schema
document, and compile it into a validator of message bodies.

    resolve    (definitions stage) references -> `SchemaDocument`, or why not
    fetch      registry/schema URLs, fetched once per load and cached
    compile    `SchemaDocument` -> `PayloadValidator` (JSON Schema, Avro, Protobuf)
    enforce    the per-route policy: off, tiebreak, enforce
"""
