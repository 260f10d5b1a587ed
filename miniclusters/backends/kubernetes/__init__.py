"""The Kubernetes backend: the official client, the objects it applies, and the status it reads."""
