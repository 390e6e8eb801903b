"""Seasons: opening one, its manifest, its methods card, the code version and its archive."""
