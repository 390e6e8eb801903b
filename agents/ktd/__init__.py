"""KTD-Fin's open-research tools: six read-only research tools over the point-in-time gateway."""
