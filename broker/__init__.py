"""The built-in broker: a pure-Python Flux-compatible broker on pyzmq."""
