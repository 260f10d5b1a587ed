"""One member of a NACA0012 parameter sweep: set the free stream (angle of attack, Mach), add forceCoeffs, read Cl/Cd.

The tutorial's free stream is `Uinlet (250 0 0)` at `Tinlet 298` and `pOut 1e5` in the x-z plane (y is the
extruded, one-cell-thick direction), so an angle of attack alpha turns the velocity to
`|U| (cos alpha, 0, sin alpha)` and a Mach number M sets `|U| = M sqrt(gamma R T)`. Lift and drag directions
follow alpha, so Cl is perpendicular to the free stream and Cd along it, as in wind-tunnel tables.

`parse_force_coeffs` is pure (text in, rows out): the function object's file is read by its header, so the
column order of another OpenFOAM version does not matter.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from elasticity.workloads.foam import FoamError, get_entry, set_entries

Parameter = Literal["angleOfAttack", "mach"]
PARAMETERS: Final[tuple[str, ...]] = ("angleOfAttack", "mach")
"""What a sweep may vary (the spec's `parameter`)."""
UNITS: Final[dict[str, str]] = {"angleOfAttack": "deg", "mach": ""}

GAMMA: Final = 1.4
#: Specific gas constant of the tutorial's air (molWeight 28.9): 8314.47 / 28.9 J/(kg K).
R_AIR: Final = 8314.47 / 28.9
BASE_SPEED: Final = 250.0
BASE_TEMPERATURE: Final = 298.0
BASE_PRESSURE: Final = 1.0e5
CHORD: Final = 1.0
#: extrudeMeshDict's thickness: the span of the one-cell-thick slab.
SPAN: Final = 0.1
FUNCTION_NAME: Final = "forceCoeffs"


@dataclass(frozen=True)
class FreeStream:
    """The free stream of one member: speed, angle of attack and the thermodynamic state."""

    speed: float = BASE_SPEED
    alpha_deg: float = 0.0
    temperature: float = BASE_TEMPERATURE
    pressure: float = BASE_PRESSURE

    @property
    def velocity(self) -> tuple[float, float, float]:
        a = math.radians(self.alpha_deg)
        return (self.speed * math.cos(a), 0.0, self.speed * math.sin(a))

    @property
    def lift_dir(self) -> tuple[float, float, float]:
        a = math.radians(self.alpha_deg)
        return (-math.sin(a), 0.0, math.cos(a))

    @property
    def drag_dir(self) -> tuple[float, float, float]:
        a = math.radians(self.alpha_deg)
        return (math.cos(a), 0.0, math.sin(a))

    @property
    def density(self) -> float:
        return self.pressure / (R_AIR * self.temperature)

    @property
    def mach(self) -> float:
        return self.speed / math.sqrt(GAMMA * R_AIR * self.temperature)


def free_stream(parameter: str, value: float) -> FreeStream:
    """The free stream with one parameter changed from the tutorial's; ValueError for an unknown parameter."""
    if parameter == "angleOfAttack":
        if not -30.0 <= value <= 30.0:
            raise ValueError(f"angle of attack {value} deg is outside [-30, 30]")
        return FreeStream(alpha_deg=value)
    if parameter == "mach":
        if not 0.05 <= value <= 0.95:
            raise ValueError(f"Mach {value} is outside [0.05, 0.95] (the case is subsonic)")
        return FreeStream(speed=value * math.sqrt(GAMMA * R_AIR * BASE_TEMPERATURE))
    raise ValueError(f"unknown parameter {parameter!r}; choose one of {', '.join(PARAMETERS)}")


def _vector(v: tuple[float, float, float]) -> str:
    return "(" + " ".join(f"{x:.10g}" for x in v) + ")"


def force_coeffs_dict(stream: FreeStream) -> str:
    """The forceCoeffs function object (v1912 syntax) for this free stream, every iteration."""
    return (
        f"    {FUNCTION_NAME}\n    {{\n"
        "        type            forceCoeffs;\n"
        '        libs            ("libforces.so");\n'
        "        writeControl    timeStep;\n"
        "        writeInterval   1;\n"
        "        log             false;\n"
        "        patches         (wall);\n"
        "        rho             rho;\n"
        f"        rhoInf          {stream.density:.10g};\n"
        f"        pRef            {stream.pressure:.10g};\n"
        "        CofR            (0.25 0 0);\n"
        f"        liftDir         {_vector(stream.lift_dir)};\n"
        f"        dragDir         {_vector(stream.drag_dir)};\n"
        "        pitchAxis       (0 1 0);\n"
        f"        magUInf         {stream.speed:.10g};\n"
        f"        lRef            {CHORD:g};\n"
        f"        Aref            {CHORD * SPAN:g};\n"
        "    }\n"
    )


_FUNCTIONS = re.compile(r"^functions\s*\{", re.MULTILINE)


def apply_free_stream(case: Path, stream: FreeStream) -> None:
    """Write the free stream into 0/U (Uinlet) and a forceCoeffs function object into system/controlDict.

    The tutorial's MachNo and residuals functions are dropped: they write fields and files a sweep never reads.
    """
    u_file = case / "0" / "U"
    if get_entry(u_file, "Uinlet") is None:
        raise FoamError(f"{u_file}: no Uinlet entry (not the NACA0012 tutorial?)")
    set_entries(u_file, {"Uinlet": _vector(stream.velocity)})
    control = case / "system" / "controlDict"
    text = control.read_text()
    match = _FUNCTIONS.search(text)
    block = "functions\n{\n" + force_coeffs_dict(stream) + "}\n"
    if match is None:
        text = text.rstrip() + "\n\n" + block
    else:
        end = _block_end(text, match.end() - 1)
        text = text[: match.start()] + block + text[end + 1 :]
    control.write_text(text)


def _block_end(text: str, open_brace: int) -> int:
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise FoamError("controlDict: unbalanced braces in the functions dictionary")


@dataclass(frozen=True)
class Coefficients:
    """The force coefficients at one iteration."""

    iteration: float
    cd: float
    cl: float
    cm: float | None = None


def parse_force_coeffs(text: str) -> list[Coefficients]:
    """Rows of a forceCoeffs file (`# Time Cd Cs Cl CmRoll CmPitch ...` or older `# Time Cm Cd Cl ...`).

    The column names come from the last header comment line before the data; rows that do not parse (a line
    being written) are skipped. ValueError when no header names Cd and Cl.
    """
    names: list[str] | None = None
    rows: list[Coefficients] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            words = stripped.lstrip("#").split()
            if words and words[0] == "Time" and "Cd" in words and "Cl" in words:
                names = words
            continue
        if names is None:
            continue
        values = stripped.split()
        if len(values) < len(names):
            continue
        try:
            row = dict(zip(names, (float(v) for v in values), strict=False))
        except ValueError:
            continue
        cm = row.get("CmPitch", row.get("Cm"))
        rows.append(Coefficients(row["Time"], row["Cd"], row["Cl"], cm))
    if names is None:
        raise ValueError("no forceCoeffs header naming Time, Cd and Cl")
    return rows


def force_coeffs_file(case: Path) -> Path | None:
    """The coefficient file the function object wrote (its name differs between versions), or None."""
    root = case / "postProcessing" / FUNCTION_NAME
    for name in ("coefficient.dat", "forceCoeffs.dat"):
        found = sorted(root.glob(f"*/{name}"))
        if found:
            return found[-1]
    return None


def final_coefficients(case: Path) -> Coefficients:
    """The last iteration's Cl/Cd of a finished member; FoamError when it wrote none."""
    path = force_coeffs_file(case)
    if path is None:
        raise FoamError(f"{case}: no postProcessing/{FUNCTION_NAME}/*/coefficient.dat (did the solver run?)")
    try:
        rows = parse_force_coeffs(path.read_text(errors="replace"))
    except ValueError as exc:
        raise FoamError(f"{path}: {exc}") from None
    if not rows:
        raise FoamError(f"{path}: no coefficient rows")
    return rows[-1]
