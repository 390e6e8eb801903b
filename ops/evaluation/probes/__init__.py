"""The probes: de-anonymisation, injection and memorisation (recall)."""
