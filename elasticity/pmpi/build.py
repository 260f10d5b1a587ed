"""Build the PMPI profiling library (libmcpmpi.so) with the installed MPI compiler wrapper.

The C source ships as package data, so the library is compiled on the machine (or in the image)
whose MPI the application uses: a PMPI library must match the MPI it wraps. Builds are cached per
user and redone only when the source or the compiler command changes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from elasticity.errors import ElasticityError

SOURCE = Path(__file__).with_name("mc_pmpi.c")
LIBRARY_NAME = "libmcpmpi.so"
CFLAGS = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror")
LDLIBS = ("-lpthread",)


class PmpiBuildError(ElasticityError, RuntimeError):
    """The MPI compiler wrapper is missing or failed; the message says which and why."""


MpiBuildError = PmpiBuildError  # the same error for every program built with the MPI wrapper


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/miniclusters/pmpi (default ~/.cache/miniclusters/pmpi)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "miniclusters" / "pmpi"


def _fingerprint(sources: list[tuple[str, bytes]], compiler: str, flags: tuple[str, ...], libs: tuple[str, ...]) -> str:
    """The build's identity: every file's name, length and bytes (so text moved between the source and a header
    still counts as a change), then the command."""
    h = hashlib.sha256()
    for name, data in sources:
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    h.update("\0".join((compiler, *flags, *libs)).encode())
    return h.hexdigest()


def source_files(source_path: Path) -> list[Path]:
    """The source and every header beside it (mc_pmpi.c includes mc_wait.h, which includes mc_wake.h): all of
    them go into the fingerprint, so a changed header rebuilds the cached library."""
    return [source_path, *sorted(source_path.parent.glob("*.h"))]


PREBUILT_VARIABLE = "MC_PMPI_LIBRARY"
"""Names a library built with the image's MPI (the openmpi-openfoam image sets it): used instead of compiling,
since an application image carries MPI's run time but no compiler."""


def build_pmpi_library(
    output_dir: Path | str | None = None, mpicc: str = "mpicc", force: bool = False, timeout: float = 120.0
) -> Path:
    """Compile mc_pmpi.c into <output_dir>/libmcpmpi.so and return its path (cached; see compile_with_mpicc).

    $MC_PMPI_LIBRARY naming an existing file is returned as is (unless output_dir or force ask for a build)."""
    prebuilt = os.environ.get(PREBUILT_VARIABLE, "")
    if prebuilt and output_dir is None and not force and Path(prebuilt).is_file():
        return Path(prebuilt)
    return compile_with_mpicc(SOURCE, LIBRARY_NAME, CFLAGS, LDLIBS, output_dir, mpicc, force, timeout)


def compile_with_mpicc(
    source_path: Path,
    output_name: str,
    flags: tuple[str, ...],
    libs: tuple[str, ...] = (),
    output_dir: Path | str | None = None,
    mpicc: str = "mpicc",
    force: bool = False,
    timeout: float = 120.0,
) -> Path:
    """Compile a C source shipped with the package with the MPI wrapper; return <output_dir>/<output_name>.

    Reuses the existing output when a stamp file shows it was built from the same source with the
    same command. Raises PmpiBuildError naming the missing compiler or carrying its stderr.
    """
    out_dir = Path(output_dir) if output_dir is not None else default_cache_dir()
    compiler = shutil.which(mpicc)
    if compiler is None:
        raise PmpiBuildError(
            f"MPI compiler wrapper {mpicc!r} not found on PATH; install an MPI development package "
            "(Debian: libopenmpi-dev) or pass the wrapper's path"
        )
    try:
        sources = [(path.name, path.read_bytes()) for path in source_files(source_path)]
    except OSError as exc:
        raise PmpiBuildError(f"source {source_path} is missing from the package: {exc}") from exc
    stamp = _fingerprint(sources, compiler, flags, libs)
    lib = out_dir / output_name
    stamp_file = out_dir / (output_name + ".sha256")
    if not force and lib.is_file() and stamp_file.is_file() and stamp_file.read_text().strip() == stamp:
        return lib

    out_dir.mkdir(parents=True, exist_ok=True)
    # Compile to a temporary name, then rename: a concurrent build or a running job never sees
    # a half-written library.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{output_name}.", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    cmd = [compiler, *flags, "-o", str(tmp), str(source_path), *libs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        tmp.unlink(missing_ok=True)
        raise PmpiBuildError(f"running {' '.join(cmd)} failed: {exc}") from exc
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise PmpiBuildError(
            f"{mpicc} failed (exit {proc.returncode}) building {source_path.name}:\n"
            f"{proc.stderr.strip() or proc.stdout}"
        )
    tmp.chmod(0o755)
    tmp.replace(lib)
    stamp_file.write_text(stamp + "\n")
    return lib


def main(argv: list[str] | None = None) -> int:
    """`python -m elasticity.pmpi.build [--output-dir DIR] [--mpicc CC] [--force]`: print the path."""
    parser = argparse.ArgumentParser(prog="python -m elasticity.pmpi.build", description=__doc__)
    parser.add_argument("--output-dir", type=Path, default=None, help="default: %(default)s -> per-user cache")
    parser.add_argument("--mpicc", default="mpicc", help="MPI C compiler wrapper (default: mpicc)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    try:
        print(build_pmpi_library(args.output_dir, args.mpicc, force=args.force))
    except PmpiBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
