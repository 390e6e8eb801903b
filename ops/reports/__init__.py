"""Reports: leaderboards and agent reports from the ledger, their records, exports, figures and
plots."""
