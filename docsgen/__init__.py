"""The documentation site's generators: reference pages, the code map, the benchmarks page, the diagrams."""
