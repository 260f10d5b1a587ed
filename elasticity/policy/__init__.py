"""Pure policies (no I/O) shared by the simulator and the live controllers."""
