"""Pure models (no I/O): how jobs and nodes behave, shared by the simulator and the live controllers."""
