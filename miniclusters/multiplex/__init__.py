"""The multiplexing controller's shells: Flux jobs as simulations, backend ports, the CLI's wiring."""
