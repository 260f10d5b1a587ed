"""Scheduling as pure functions over a snapshot: the live job manager and the simulator call the same code."""
