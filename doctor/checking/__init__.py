"""The check machinery: the contract a check implements, how checks are found, and running them over a bundle.

- ``contract``: the ``@check`` decorator, ``CheckSpec``, ``Fire``/``Pass``/``NotApplicable``, the
  docstring-section parser (the anchors' ``check.py``);
- ``registry``: every module of ``checks/`` plus third-party entry points;
- ``runner``: each check fed only the evidence it declared, its result or its error recorded, the
  verdict asked for, the ``Report`` assembled.

The anchors keep these three as modules at the top level of ``doctor/``; here they share a folder
so that the top level shows the stages, and this folder is the analysis stage's engine room. The
check toolkit that check bodies call (``doctor.checklib``) stays apart: checks import it, while
only the commands and the runs import the runner.
"""
