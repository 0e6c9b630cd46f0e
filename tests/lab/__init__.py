"""The lab (``doctor.lab``), the simulator behind ``llm-doctor demo``."""
