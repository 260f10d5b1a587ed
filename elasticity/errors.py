"""The root of the elasticity package's errors, so a caller can catch whatever it raises on purpose in one
place: ActuatorError (the ports' answer that an action could not be carried out; backends subclass it),
TraceFormatError and SWFError (input wrong as given, also ValueErrors), PolicyError, FoamError and PmpiBuildError
(failures while running, also RuntimeErrors)."""

from __future__ import annotations


class ElasticityError(Exception):
    """The root of every error the elasticity package raises on purpose."""
