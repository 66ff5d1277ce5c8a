"""xRegistry definitions: load, normalize, resolve and validate."""
