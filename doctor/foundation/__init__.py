"""The small shared foundations every stage stands on: leaves that import nothing of ``doctor`` outside this folder.

- ``clock``: the one monotonic clock a run's probes share;
- ``console``: the stderr console every command message goes to;
- ``errors``: the errors that cross module boundaries;
- ``redact``: the redaction pass applied before a bundle is stored or shown;
- ``serial``: dataclass <-> JSON conversion for bundles and reports;
- ``signals``: SIGINT and SIGTERM handled alike;
- ``stats``: the one quantile rule;
- ``strenum``: an enum whose members are their strings;
- ``this_host``: whether a URL's host is this machine (the one "same host" rule);
- ``units``: how numbers read in every output;
- ``user_paths``: output paths checked before anything is sent;
- ``wire``: sanitising strings and JSON that come from outside.

They sit together so that the top level of ``doctor/`` shows the stages, not the leaves; and
because none of them imports anything above it (``tests/project/test_layering.py`` holds that), any stage
may use any of them. The anchors' layout keeps ``errors.py`` and ``redact.py`` at the top level:
here they join the leaves they are, while ``exit_codes.py`` stays at the top level beside
``model.py``, because it reads the result model (a report's severities) and is no leaf.
"""
