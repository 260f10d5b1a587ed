"""Test doubles that enforce the real APIs' rules (the Kubernetes API server fake)."""
