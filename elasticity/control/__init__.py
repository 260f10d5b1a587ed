"""Loops: observe -> plan -> act. Observing and acting go through the ports; planning is pure."""
