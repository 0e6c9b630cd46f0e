"""The bodies of the ``llm-doctor`` commands, one module per command (``doctor.cli`` declares them).

Each ``run`` takes the resolved flags and returns an ``ExitCode``; ``doctor.cli`` wraps it in
``guard.run_guarded``. Command modules are imported only by the command that runs, so
``llm-doctor log`` never loads the lab or the HTML renderer.
"""
