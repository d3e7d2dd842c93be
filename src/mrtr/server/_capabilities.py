"""Which client capability an ask needs, and whether a client's declared ones have it."""

from __future__ import annotations

import msgspec

from mrtr.protocol import CreateMessageRequest, ElicitRequest, InputRequest

__all__ = ["FORM_NEEDS", "ROOTS_NEEDS", "URL_NEEDS", "capability_missing", "required_capability"]

FORM_NEEDS: dict[str, object] = {"elicitation": {"form": {}}}
URL_NEEDS: dict[str, object] = {"elicitation": {"url": {}}}
ROOTS_NEEDS: dict[str, object] = {"roots": {}}


def capability_missing(declared: object, needed: dict[str, object]) -> bool:
    """True when the client's declared capabilities lack what `needed` asks for.

    `{"elicitation": {}}` is form support (spec: client/elicitation); `{"elicitation": {"url": {}}}`
    alone does not.
    """
    if not isinstance(declared, msgspec.Struct | dict):
        return True
    for name, sub in needed.items():
        # The capabilities Struct's fields are single words, so attribute == wire name.
        have = (declared.get(name) if isinstance(declared, dict)
                else getattr(declared, name, None))
        if not isinstance(have, dict):
            return True
        if name == "elicitation" and isinstance(sub, dict) and "form" in sub:
            if have and "form" not in have:
                return True
            continue
        if isinstance(sub, dict):
            for inner in sub:
                if not isinstance(have.get(inner), dict):
                    return True
    return False


def required_capability(request: InputRequest) -> dict[str, object]:
    """The client capability an input request needs: elicitation (form, url), sampling, roots."""
    if isinstance(request, ElicitRequest):
        return URL_NEEDS if request.params.mode == "url" else FORM_NEEDS
    if isinstance(request, CreateMessageRequest):
        params = request.params
        uses_tools = params.tools is not msgspec.UNSET or params.tool_choice is not msgspec.UNSET
        return {"sampling": {"tools": {}} if uses_tools else {}}
    return ROOTS_NEEDS
