"""LD301's remediation: turn response buffering off for the streaming route, in the answering gateway's
terms (each family's ``buffering`` row, ``doctor.gateways``), and what an Ingress's own buffering
annotation already says. Public through ``doctor.checklib``; the shared phrasing is ``gateway_phrasing``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import also_in_path, as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.evidence import IngressInfo
from doctor.gateways import BY_ID, Phrasing, phrasing, suspects
from doctor.model import Remediation

#: The usual suspects' switches, for a gateway nothing identified: possibilities, never one product's knob.
GENERIC_BUFFERING = Phrasing(
    "response buffering", "off on the streaming route: " + "; ".join(suspects("buffering")),
    where="{name}: the route that proxies /v1/chat/completions and /v1/completions",
    why="{name} releases the stream in {burst} instead of per token. Turn response buffering off for the streaming "
        "route, with the switch of the product it is (the suggestion lists the usual ones; an upstream can also "
        "send `X-Accel-Buffering: no` to nginx, and Caddy before v2.7 spelled it `buffer_responses`).")


def buffering_remediation(gw: GatewayView | None, burst: str, verify: str) -> Remediation:
    """LD301: turn response buffering off for the streaming route, in the answering gateway's terms."""
    family, name = who_answered(gw)
    row = phrasing(family, "buffering")
    rem = (row or GENERIC_BUFFERING).remediation(verify, name=name, burst=burst)
    if family in BY_ID and gw and gw.primary and gw.primary.inferred:
        rem.why += BY_ID[family].inferred_buffering
    if gw and gw.ingress and row is not None:
        _as_annotated(rem, gw.ingress, row.setting)
    rem.why += also_in_path(gw)
    return as_unidentified(rem, family)


#: Annotation values that turn an Ingress controller's proxy buffering off (community "off", F5 "False").
BUFFERING_OFF = ("off", "false")


def _as_annotated(rem: Remediation, ingress: IngressInfo, annotation: str) -> None:
    """What the Ingress already says about buffering: its value is the current one, and a value that
    already turns buffering off means something else buffers."""
    value = ingress.annotations.get(annotation)
    if value is None:
        return
    where = f"Ingress {ingress.namespace}/{ingress.name}"
    rem.current = f'"{value}" on {where}'
    if value.strip().lower() in BUFFERING_OFF:
        rem.why += (f' The {where} already has `{annotation}: "{value}"`, yet the stream arrived in bursts: '
                    "something else buffers. Look at the controller's ConfigMap or a configuration snippet "
                    "that overrides the annotation, another hop in the path, and the application's own server.")
