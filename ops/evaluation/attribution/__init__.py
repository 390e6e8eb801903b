"""Barra-style factor attribution of an account's returns (KTD-Fin's re-scoring).

The package splits each period's portfolio return into market, style, selection and trading
parts that sum to it exactly: `exposures` (point-in-time style exposures from bars and
fundamentals), `cross_section` (one period's standardisation, VIF screen and WLS regression),
`decomposition` (the per-period parts and their Carino-linked window sums), `ledger_inputs`
(reading an account's holdings and its universe's bars, and running the three) and `output`
(the records and table rows the CLI and the web show).
"""
