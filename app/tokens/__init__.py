"""The API tokens page: create (the secret shown once), list and revoke your tokens."""
