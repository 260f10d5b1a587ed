"""PNG figures for results people would rather see than read (Agg canvas: no global matplotlib backend)."""
