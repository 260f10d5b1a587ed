"""Real workloads for the profiler and the controllers: the OpenFOAM NACA0012 case and its decompositions."""
