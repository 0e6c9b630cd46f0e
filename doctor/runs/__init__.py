"""Runs beyond one diagnosis: the pipeline every live diagnosis goes through, and what is built
from several of them (repeated, compared, side by side, swept).

- ``pipeline``: collect -> save -> load -> analyze, one ``Report``, no flags and no rendering;
- ``watch_round``: one round of ``watch`` (or a fleet ``diagnose``): its targets, retries while a
  target is down, the round kept in ``--history``;
- ``outage``: what a down target looks like in a bundle, and when to try it again;
- ``compare_runs``: two analysed runs, whether they may be compared and what changed enough to matter;
- ``rank_tests``: the two-sample statistics ``compare_runs`` and ``fleet_view`` judge with (U test, shift, sizes);
- ``fleet_view``: a fleet's replicas side by side, their imbalance and the fleet's verdict;
- ``sweep_knee``: the SLO knee of a load sweep, why it is there, and the setting that follows.
- ``verify_outcome``: the whole of a ``verify`` run, the eval gate's answers half
  (``doctor.verify``) beside a latency half judged by ``compare_runs``' rule, and its exit code.

Everything here is pure or goes through ``pipeline``: no module prints or writes a report. What
the commands show of a run is theirs (``doctor.commands``) and the renderers' (``reports/``),
which is why a round's outputs live in ``doctor.commands.round_outputs``. The anchors have no
repeated runs (their tools diagnose once); this folder is where ``watch``, ``compare``, fleets
and sweeps add to that shape without reaching up into the command layer.
"""
