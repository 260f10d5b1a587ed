"""An application image's own programs and environment, for pods that run on this machine instead of the image.

On Kubernetes `examples/hello.yaml` runs `mpi-hello` from the openmpi-openfoam image. Locally there is no image,
so the local backend gives the pods what the image would: the programs built from `images/<name>/*.c` (the same
sources the Dockerfile compiles), compiled on first use into a cache and put first on the pods' PATH, and the
`ENV` of the Dockerfile's final stage (e.g. Open MPI's run-as-root opt-in). Images we do not build (any other
name, or an installed package without the `images/` tree) are left to the machine's own PATH.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common import atomic
from miniclusters.errors import MiniclustersError

IMAGES_DIR = Path(__file__).resolve().parents[3] / "images"
CACHE_ENV = "MINICLUSTERS_CACHE_DIR"
MPI_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]mpi\.h[>\"]", re.MULTILINE)


class ProgramBuildError(MiniclustersError, RuntimeError):
    """A program of the image could not be built (missing compiler, compile error)."""


@dataclass(frozen=True)
class ImageRecipe:
    """What we know how to provide locally for one of our images."""

    name: str
    sources: tuple[Path, ...]
    environment: dict[str, str] = field(default_factory=dict)


def image_name(reference: str) -> str:
    """ghcr.io/miniclusters/openmpi-openfoam:0.1.0 (or @sha256:...) -> openmpi-openfoam."""
    reference = reference.split("@", 1)[0]
    last = reference.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def _final_stage(dockerfile: str) -> list[str]:
    """The Dockerfile's logical lines (continuations joined) after its last FROM."""
    joined = re.sub(r"\\\n", " ", dockerfile)
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]
    starts = [i for i, line in enumerate(lines) if line.split()[0].upper() == "FROM"]
    return lines[starts[-1] + 1 :] if starts else lines


def dockerfile_environment(dockerfile: str) -> dict[str, str]:
    """The ENV of the image's final stage (`ENV K=V K2=V2` and the legacy `ENV K V`)."""
    environment: dict[str, str] = {}
    for line in _final_stage(dockerfile):
        keyword, _, rest = line.partition(" ")
        if keyword.upper() != "ENV":
            continue
        words = shlex.split(rest)
        if words and "=" not in words[0]:
            environment[words[0]] = " ".join(words[1:])
            continue
        for word in words:
            key, _, value = word.partition("=")
            environment[key] = value
    return environment


def recipe_for(reference: str, images_dir: Path = IMAGES_DIR) -> ImageRecipe | None:
    name = image_name(reference)
    directory = images_dir / name
    dockerfile = directory / "Dockerfile"
    if not name or not dockerfile.is_file():
        return None
    return ImageRecipe(
        name=name,
        sources=tuple(sorted(directory.glob("*.c"))),
        environment=dockerfile_environment(dockerfile.read_text()),
    )


def cache_root() -> Path:
    """$MINICLUSTERS_CACHE_DIR, else $XDG_CACHE_HOME/miniclusters, else ~/.cache/miniclusters."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "miniclusters"


def compiler_for(source: Path) -> str:
    return "mpicc" if MPI_INCLUDE.search(source.read_text(errors="replace")) else "cc"


def build_programs(recipe: ImageRecipe, cache: Path, notify: Callable[[str], None]) -> Path | None:
    """Compile the image's programs into the cache (once per source and compiler); the directory to put on PATH.

    The cache key is the source text and the compiler's path, so an edited source or another MPI rebuilds.
    """
    if not recipe.sources:
        return None
    digest = hashlib.sha256()
    plan: list[tuple[Path, str]] = []
    for source in recipe.sources:
        compiler = compiler_for(source)
        found = shutil.which(compiler)
        if found is None:
            raise ProgramBuildError(
                f"image {recipe.name}: building its program {source.stem!r} needs `{compiler}` "
                "(apt-get install libopenmpi-dev openmpi-bin, or run `make setup`)"
            )
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0" + found.encode() + b"\0")
        plan.append((source, found))
    bindir = cache / "programs" / recipe.name / digest.hexdigest()[:16]
    for source, compiler in plan:
        target = bindir / source.stem
        if target.is_file():
            continue
        bindir.mkdir(parents=True, exist_ok=True)
        notify(f"building {source.stem} (image {recipe.name}'s program, from {source}) into {bindir} ...")
        with atomic.replacing(target) as temporary:
            result = subprocess.run(
                [compiler, "-O2", "-o", str(temporary), str(source)], capture_output=True, text=True, timeout=300
            )
            if result.returncode != 0:
                raise ProgramBuildError(
                    f"image {recipe.name}: `{Path(compiler).name} {source}` failed:\n{result.stderr.strip()}"
                )
    return bindir


def provide_image(
    reference: str, notify: Callable[[str], None], images_dir: Path = IMAGES_DIR, cache: Path | None = None
) -> tuple[Path | None, dict[str, str]]:
    """(directory of the image's programs or None, the image's environment) for a pod of `reference`."""
    recipe = recipe_for(reference, images_dir)
    if recipe is None:
        return None, {}
    return build_programs(recipe, cache or cache_root(), notify), dict(recipe.environment)
