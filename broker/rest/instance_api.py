"""The instance itself: its up nodes, and shutting it down (the superuser's)."""

# No `from __future__ import annotations`: FastAPI reads the parameters' annotations at runtime.

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from broker.rest.schemas import PROTECTED, Detail
from broker.rest.state import Rest

router = APIRouter()


@router.get("/v1/nodes", tags=["nodes"], responses=PROTECTED)
def nodes(request: Request, rest: Rest) -> JSONResponse:
    """Up nodes, each host once (ranks sharing a host, as in a test instance, are one node)."""
    rest.auth.current_user(request)
    return JSONResponse({"nodes": list(dict.fromkeys(rest.service.nodes()))})


@router.post("/v1/service/stop", tags=["service"], responses={**PROTECTED, 403: {"model": Detail}})
def stop(request: Request, rest: Rest) -> dict[str, str]:
    """Shut the instance down (superuser only)."""
    if not rest.auth.current_user(request).is_superuser:
        raise HTTPException(403, "only the superuser may stop the service")
    rest.service.shutdown()
    return {"Message": "Service is stopping."}
