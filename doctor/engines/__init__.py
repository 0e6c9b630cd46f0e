"""The engines llm-doctor reads, one record each, and the tables derived from the records.

Each engine is one module holding one ``EngineRecord`` (``record``): ``vllm``, ``sglang``,
``llamacpp``, ``tgi``, ``trtllm``. Everything that lists engines is derived from ``RECORDS``:

- ``names``: ids, display names, metric prefixes, log markers, ``owned_by`` and ``Server``
  header words, and the identification that scores them ("unknown" over a guess);
- ``openings``: the pieces of the log scanner's gate (``doctor.logscan.gate``);
- ``server_info``: the self-description routes and the fields kept from their answers;
- the metric names of each quantity (``doctor.engine_metrics.metric_names``), the flags a remediation
  names (``doctor.checklib.remediation``), what an engine never exposes
  (``doctor.engine_readers.normal``), and which reader reads a log
  (``doctor.engine_readers.logs.PARSERS``, by the record's id).

This package sits below the parser packages (``doctor.logscan``, ``doctor.engine_metrics``,
``doctor.engine_readers``) and imports none of them (``tests/project/test_layering.py``).
Adding an engine: ``docs/engine-coverage.md``.
"""

from __future__ import annotations

from doctor.engines import llamacpp, sglang, tgi, trtllm, vllm
from doctor.engines.record import EngineRecord

#: Every engine, vLLM first; other engines' log markers are tried in this order.
RECORDS: tuple[EngineRecord, ...] = (vllm.RECORD, sglang.RECORD, llamacpp.RECORD, tgi.RECORD, trtllm.RECORD)
BY_ID: dict[str, EngineRecord] = {r.id: r for r in RECORDS}
