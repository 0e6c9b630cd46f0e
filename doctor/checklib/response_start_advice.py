"""LD307's remediation: send the response start at once instead of holding it until the first token,
in the answering gateway's terms (each family's ``response_start`` row, ``doctor.gateways``).
Public through ``doctor.checklib``; the shared phrasing is ``gateway_phrasing``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.gateways import BY_ID, START_WHERE, Phrasing, phrasing, suspects
from doctor.model import Remediation

GENERIC_RESPONSE_START = Phrasing(
    "gateway_response_start", "send the response headers as soon as the upstream's arrive", where=START_WHERE,
    why="{name} holds the response start until the first token; what holds it is one of: "
        + "; ".join(suspects("response_start")) + ".",
)


def response_start_remediation(gw: GatewayView | None, verify: str, *, compressed: bool = True) -> Remediation:
    """LD307: send the response start at once, in the answering gateway's terms; ``compressed``: whether
    the gateway's answer carried a Content-Encoding (nginx's gzip is then a suspect, else only its
    buffering: the record's ``uncompressed_start``)."""
    family, name = who_answered(gw)
    row = phrasing(family, "response_start") or GENERIC_RESPONSE_START
    uncompressed = BY_ID[family].uncompressed_start if family in BY_ID else None
    if not compressed and uncompressed is not None:
        row = uncompressed
    return as_unidentified(row.remediation(verify, name=name), family)
