"""Pure models: CPU request mapping, node capacity and resize admission, the throughput model."""
