"""The MiniCluster API: the spec models, their validation rules, loading and conversion."""

from miniclusters.api.errors import Problem, SpecError
from miniclusters.api.load import load_minicluster, load_minicluster_file
from miniclusters.api.spec import MiniCluster, MiniClusterSpec

__all__ = [
    "MiniCluster",
    "MiniClusterSpec",
    "Problem",
    "SpecError",
    "load_minicluster",
    "load_minicluster_file",
]
