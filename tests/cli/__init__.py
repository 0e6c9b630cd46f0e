"""The command line (``doctor.cli``), its settings and config file, and the demo end to end."""
