"""The autoscaling loop wired to real backends and brokers (the plan itself is in `elasticity`)."""
