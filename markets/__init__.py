"""Markets: domain types, market rules, calendars, paper execution and (later) data sources.

This is the bottom layer: it imports nothing else of openbell.
"""
