"""PMPI duty-cycle profiler: the C interposition library (mc_pmpi.c), its build and its launch environment."""
