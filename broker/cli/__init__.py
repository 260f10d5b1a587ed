"""The in-cluster `flux` command line (same spellings as Flux's)."""
