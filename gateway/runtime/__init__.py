"""The daemon's engine: routes that move messages from a consumer to producers."""
