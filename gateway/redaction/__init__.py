"""What a sender sent, as the gateway's own outputs may show it.

    rules      what a route's `redact:` path may be (read by the config check)
    redactor   `Redactor`: hides credential headers and `redact:` paths in records and in
               the texts that describe them
"""
