"""Built-in brokers of a multiplexed cluster advertise task slots for `max` simulations (not exclusive cores)."""

from __future__ import annotations

from pathlib import Path

from miniclusters.api import load_minicluster_file
from miniclusters.render.entrypoint import broker_options, multiplexing_slots

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multiplex.yaml"


def test_example_brokers_offer_room_for_max_simulations() -> None:
    mc = load_minicluster_file(EXAMPLE)
    # 4 ranks on 2 pods = 2 per pod, times max 3 simulations
    assert multiplexing_slots(mc) == 6
    assert "-Sresource.cores=0-5" in broker_options(mc)


def test_no_slots_without_multiplexing_or_with_real_flux() -> None:
    mc = load_minicluster_file(EXAMPLE)
    off = mc.model_copy(deep=True)
    off.spec.multiplexing.enabled = False
    assert multiplexing_slots(off) == 0 and not any("resource.cores" in o for o in broker_options(off))
    flux = mc.model_copy(deep=True)
    flux.spec.flux.flavour = "flux"
    assert multiplexing_slots(flux) == 0
