"""Usage and budgets: the ledger of what every attempt spent (``ledger``), its copy on
the board (``share``), the spend a budget or a report reads (``spend``: the home's
records and the board's, merged once) and the budgets themselves (``budget``).
docs/ARCHITECTURE.md §3.7."""
