"""The bottom layer: small helpers every package may import (broker, elasticity, miniclusters, bursting) and that
import none of them: whole-file writes (`atomic`), Flux idsets and kernel CPU lists (`idset`), one stream written
to several files (`tee`), injected clocks (`clock`). Standard library only, so the lean job CLI and the MPI
ranks' CPU binder can load it cheaply.
"""
