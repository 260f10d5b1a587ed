"""Simulation: the ports implemented over `elasticity.model`, with a virtual clock, for the simulator and tests."""
