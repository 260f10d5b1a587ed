"""Models on plain numbers: what a CPU request means to the kernel, sizes, nodes, and what a node admits.

No I/O and no imports of `broker` or `miniclusters`: the simulator, the policies and every backend ask these
functions, so a rule (a request's weight, a resize's admission) is decided in exactly one place.
"""
