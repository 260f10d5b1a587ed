"""Reading Cl/Cd from forceCoeffs output, and writing the free stream a member sweeps (no OpenFOAM needed)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from elasticity.workloads.foam import FoamError
from elasticity.workloads.naca_sweep import (
    apply_free_stream,
    final_coefficients,
    free_stream,
    parse_force_coeffs,
)

V1912 = """# Force coefficients
# dragDir       : (9.97564050e-01 0.00000000e+00 6.97564737e-02)
# magUInf       : 2.50000000e+02
#
# Time          \tCd              \tCs              \tCl              \tCmRoll          \tCmPitch         \tCmYaw
1               \t6.65913998e-01\t-6.7e-20\t2.69679196e+00\t-1.3e-01\t-5.26738796e-01\t3.3e-02
2               \t6.15121684e-01\t-3.0e-20\t2.81547079e+00\t-1.4e-01\t-8.01619852e-01\t3.0e-02
3               \t5.9e-01\t-3.0e-20
"""
OLDER = """# Time  Cm  Cd  Cl  Cl(f)  Cl(r)
10  0.01  0.02  0.3  0.15  0.15
20  0.011  0.021  0.31  0.155  0.155
"""


def test_v1912_file_by_its_header_and_a_torn_last_line_skipped() -> None:
    rows = parse_force_coeffs(V1912)
    assert [r.iteration for r in rows] == [1.0, 2.0]  # row 3 is being written: skipped
    assert rows[-1].cd == pytest.approx(0.615121684)
    assert rows[-1].cl == pytest.approx(2.81547079)
    assert rows[-1].cm == pytest.approx(-0.801619852)


def test_older_column_order_is_read_by_name() -> None:
    rows = parse_force_coeffs(OLDER)
    assert (rows[-1].cd, rows[-1].cl, rows[-1].cm) == (0.021, 0.31, 0.011)


def test_no_header_is_an_error() -> None:
    with pytest.raises(ValueError, match="header"):
        parse_force_coeffs("1 2 3\n")


def test_final_coefficients_of_a_case_and_of_one_that_never_ran(tmp_path: Path) -> None:
    with pytest.raises(FoamError, match=r"coefficient\.dat"):
        final_coefficients(tmp_path)
    out = tmp_path / "postProcessing" / "forceCoeffs" / "0"
    out.mkdir(parents=True)
    (out / "coefficient.dat").write_text(V1912)
    assert final_coefficients(tmp_path).cl == pytest.approx(2.81547079)


def test_angle_of_attack_turns_the_stream_and_the_lift_direction() -> None:
    stream = free_stream("angleOfAttack", 8.0)
    u = stream.velocity
    assert math.hypot(u[0], u[2]) == pytest.approx(250.0)
    assert math.degrees(math.atan2(u[2], u[0])) == pytest.approx(8.0)
    lift, drag = stream.lift_dir, stream.drag_dir
    assert sum(a * b for a, b in zip(lift, drag, strict=True)) == pytest.approx(0.0, abs=1e-12)
    assert drag == pytest.approx(tuple(x / 250.0 for x in u))


def test_mach_sets_the_speed_from_the_speed_of_sound() -> None:
    assert free_stream("mach", 0.6).mach == pytest.approx(0.6)
    assert free_stream("mach", 0.6).speed == pytest.approx(0.6 * math.sqrt(1.4 * 8314.47 / 28.9 * 298.0))
    with pytest.raises(ValueError, match="unknown parameter"):
        free_stream("reynolds", 1e6)
    with pytest.raises(ValueError, match="subsonic"):
        free_stream("mach", 1.2)


CONTROL = """FoamFile
{
    object      controlDict;
}
application     rhoSimpleFoam;
endTime         1000;

functions
{
    #includeFunc MachNo
    #includeFunc residuals
}
"""


def test_apply_free_stream_rewrites_uinlet_and_replaces_the_functions(tmp_path: Path) -> None:
    (tmp_path / "0").mkdir()
    (tmp_path / "system").mkdir()
    (tmp_path / "0" / "U").write_text("FoamFile\n{\n    object U;\n}\nUinlet          (250 0 0);\n")
    (tmp_path / "system" / "controlDict").write_text(CONTROL)
    apply_free_stream(tmp_path, free_stream("angleOfAttack", 4.0))
    u = (tmp_path / "0" / "U").read_text()
    assert "(249.3910126 0 17.43911844);" in u
    control = (tmp_path / "system" / "controlDict").read_text()
    assert control.count("functions") == 1 and "MachNo" not in control
    assert "type            forceCoeffs;" in control and "patches         (wall);" in control
    assert "endTime         1000;" in control
    with pytest.raises(FoamError, match="Uinlet"):
        (tmp_path / "0" / "U").write_text("FoamFile\n{\n}\n")
        apply_free_stream(tmp_path, free_stream("mach", 0.5))
