"""The probes (``doctor.probes``) against real servers, gateways and fakes of what cannot run here."""
