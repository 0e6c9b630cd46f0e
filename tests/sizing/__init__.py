"""Model-config sizing (``doctor.sizing``)."""
