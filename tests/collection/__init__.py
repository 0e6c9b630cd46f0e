"""The collector, the run record, and the bundle it writes: redaction, serialisation, hostile input."""
