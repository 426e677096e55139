"""Read models: dashboard, status, health, the ledger check and row counts. They only read."""
