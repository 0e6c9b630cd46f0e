"""Collection: the probes run in order and assembled into one redacted ``Bundle``, its run record completed.

- ``collector``: which probes a request needs, in what order, under one deadline; a failing
  probe leaves an ``EvidenceError``, never an exception;
- ``run_record``: the run's identity (shape, model, engine, machine) filled in last, from the
  request and what the probes learned (its docstring says why this happens here, not at analysis).

The probes themselves are ``doctor.probes`` (the only code with side effects); this folder is the
one that calls them, and nothing downstream of a bundle imports it (``tests/project/test_layering.py``).
The anchors have ``collect`` as a command over the probes; the folder holds the collector and the
one step that belongs to it, so ``doctor/`` shows collection as a stage beside ``checking``.
"""
