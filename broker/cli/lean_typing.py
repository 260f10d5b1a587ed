"""typing.cast for the lean job commands, without importing `typing` at run time (it costs `flux run` 5 ms).

The type checker sees typing.cast; at run time it is the identity. Used where JSON or argv enters a typed shape.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import cast as cast
else:

    def cast(_type: object, value: object) -> object:
        """The identity (typing.cast's behaviour)."""
        return value
