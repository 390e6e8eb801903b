"""Logging: structlog rendering and the routing of log lines."""
