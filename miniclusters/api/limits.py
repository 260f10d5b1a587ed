"""Lengths and counts the CRD needs to price its CEL rules, shared by every spec module (split from spec.py)."""

from __future__ import annotations

# Lengths the CRD needs to price its CEL rules (a rule's estimated cost grows with the longest string or list it
# may read; unbounded, the API server refuses the CRD), each the natural limit of what the field holds.
DNS_LABEL_MAX = 63
"""A DNS-1123 label: a container, Service, Secret, claim or ensemble name."""
ARG_MAX = 131072
"""Linux's MAX_ARG_STRLEN: the longest single argument a command line can carry (a command is passed as one)."""
PATH_MAX = 4096
MPI_NAME_MAX = 64
SETTING_MAX = 64
"""A short setting written as text: a duration, a topology."""
NAME_MAX = 253
"""A DNS-1123 subdomain: a Secret, ConfigMap or PersistentVolumeClaim name."""
QUANTITY_MAX = 64
VOLUMES_MAX = 64
"""Volumes per container."""
LIST_MAX = 64
"""Tolerations of the pods, bursted clusters: bounded so the rules on each item are priced."""
CONTAINERS_MAX = 32
"""Containers (or services) per pod: far above any real pod, low enough to price a rule per container."""
