"""Simulation: the ports implemented over `elasticity.model` with a virtual clock (cluster.py), and the
event-driven scheduling simulator that replays traces through the policies the live loops call (engine.py)."""
