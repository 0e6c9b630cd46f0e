"""Built-in checks: one module per check, the file named for the check.

Nothing here lists them: ``doctor.checking.registry`` imports every module of this package and keeps
the ``CheckSpec`` objects it finds. To add a check, add a file (see ``doctor/checking/contract.py`` for
the contract and DEVELOPERS.md for the conventions) and its fixtures under
``fixtures/checks/<check-name>/``.
"""
