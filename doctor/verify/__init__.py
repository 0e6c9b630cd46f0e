"""The eval gate behind ``llm-doctor verify``: whether a changed stack still answers as the stable one does.

Pure, like the checks: the prompts (a built-in set kept as data, or the user's file), what an
answer is and its structural checks, the teacher-forced scoring against the baseline's own
noise floor, and the PASS / FAIL / ABSTAIN decision of the answers half. The requests are the
probe's (``doctor.probes.answers``); the latency half is ``compare``'s rule
(``doctor.runs.compare_runs.judge``), so the whole of a run (both halves and the exit code) is
``doctor.runs.verify_outcome``, above this package: the gate imports nothing of ``doctor.runs``,
whose pipeline reaches the probes that import the gate. ``doctor.commands.verify`` ties them together.

A package of its own rather than modules of ``doctor/runs/``: ``runs`` reads analysed runs
(reports and bundles), while this gate reads answers and prompt log-probabilities, and ships a
data file (``prompts.jsonl``).
"""
