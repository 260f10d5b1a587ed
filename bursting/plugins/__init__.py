"""The burst plugins shipped with miniclusters: `local` and `kubernetes` (entry points in pyproject.toml)."""
