"""The MiniCluster operator: pure reconcile planning (reconcile.py), a rate-limited loop (controller.py),
and its deployment manifests (manifests.py)."""
