"""The derived views (``doctor.derive``): their inputs, their JSON types, the gateway and engine views."""
