"""Ops: the command line, configuration, logging, metrics and reports."""
