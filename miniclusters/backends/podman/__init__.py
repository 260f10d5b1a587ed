"""The podman backend: the rendered MiniCluster (Secret, ConfigMap, headless Service, Indexed Job) played as real
OCI pods with `podman kube play`, one per Job index, on a podman network of the cluster's own.

Modules: pods (pure: rendered objects -> pod documents), engine (the podman command), state (the record on disk),
observe (pods as PodStatus), core, actuate (scale, resize), backend (PodmanBackend).
"""
