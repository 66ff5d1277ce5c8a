"""Metrics and logs with the same labels for every adapter and route."""
