"""The checks (``checks/``), their fixtures, the contract, the registry and the runner."""
