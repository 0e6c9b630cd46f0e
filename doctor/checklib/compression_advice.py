"""LD302's remediation: stop compressing the token stream, in the answering gateway's terms (each
family's ``compression`` row, ``doctor.gateways``, and the usual suspects for an unidentified one).
Public through ``doctor.checklib``; the shared phrasing is ``gateway_phrasing``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.gateways import Phrasing, phrasing, suspects
from doctor.model import Remediation

GENERIC_COMPRESSION = Phrasing(
    "response compression", "off for text/event-stream: " + "; ".join(suspects("compression")),
    where="{name}: response compression on the streaming route",
    why="{name} {enc}-compresses the event stream; compressors buffer until their window fills. Leave "
        "text/event-stream out, with the switch of the product it is (the suggestion lists the usual ones).")


def compression_remediation(gw: GatewayView | None, enc: str, verify: str) -> Remediation:
    """LD302: stop compressing the token stream, in the answering gateway's terms."""
    family, name = who_answered(gw)
    row = phrasing(family, "compression") or GENERIC_COMPRESSION
    return as_unidentified(row.remediation(verify, name=name, enc=enc), family)
