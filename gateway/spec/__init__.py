"""The vocabulary every checked input shares: declarative specs and the problems they find.

    fields         a spec as a tree of `Field`s (the config's `CONFIG_SPEC`, each adapter's
                   option spec)
    parse          a raw value + a `Field` -> a checked plain value and problems
    durations      `500ms`, `30s`, `1m30s`: one convention for every time value
    secret         `Secret`, a value that never prints, and URI redaction
    problems       `Problem`: severity, file, JSON path, line and fix; `suggest`
    yamlpositions  the line and column of every JSON path of a YAML document

It sits below everything that reads operator input (config, definitions, option specs)
and imports nothing of the gateway but itself.
"""
