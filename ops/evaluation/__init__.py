"""Evaluation: return metrics and conventions, ranking, bootstrap, significance, behaviour,
attribution, concordance, benchmarks, seeds compared and the probes. It imports neither the command
line nor the web (import-linter)."""
