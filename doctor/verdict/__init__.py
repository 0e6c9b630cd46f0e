"""The verdict: which symptom dominates, why (with numbers), and the ONE remediation.

``classify(evidence, results, budgets) -> Verdict`` is a pure function of the evidence views and
the check results, in five steps:

1. **What users felt**, from every witness (``user_felt``): the probe's requests per path
   (censored ones at their lower bound), the server's own histograms over the probe window
   (every user's requests, not only ours) and Prometheus history. Each gives TTFT p90, TPOT p90
   and freezes inside answers (each answer's largest gap, held to the first-token budget, since
   a reader waits for it as for a first token). A histogram's p90 is counted at its bucket's
   lower bound, so only what the witness surely saw goes over budget. The verdict takes the
   *worst credible* witness, names it, and keeps the probe's numbers beside it.
2. **Where it went.** Two decompositions, in seconds, of means (server histograms give
   nothing else), each share of the mean it splits, which the report names. First token, on the
   path users take: gateway share (gateway minus direct TTFT mean), transport (direct client
   TTFT mean minus the server's), server queue and server prefill (histogram means). When a
   server witness decided, or the server's TTFT mean exceeds the probe's (the probe's requests
   were the lucky ones), the split is of the server's TTFT mean, as the queue and prefill
   checks quote it. Inter-token time, on the engine path: stalls (gaps over ``STALL_FACTOR`` x
   the request's median, above that median) and the steady decode left; from the server's
   inter-token histogram when no probe stream ran. Stalls are preemption stalls when
   preemptions were counted, else prefill interference when that check fired; steady decode is
   the GPU's state or the batch depth when those checks fired. Steady decode within the TPOT
   budget is no excess, so it counts only above that budget when the dominant part is chosen.
3. **The symptom.** ``proxy-only`` when the engine is within budget (direct probe and server
   histograms) and the gateway path is not, when the gateway holds most of the first-token
   time, when most gateway requests fail while direct ones succeed, or when the gateway
   delivers the stream in bursts the engine does not send (the one-flush-per-token contract is
   broken even within budget). Otherwise the symptom furthest over its budget, *relative to that
   budget* (3x the TTFT budget outweighs 1.2x the TPOT budget whatever the answer length).
4. **A headline is felt latency, and only that.** Within every budget, a warning or critical
   finding users *felt* (``Finding.felt``) of a latency class (pre-first-token, inter-token,
   proxy-only) still makes that class the verdict: the finding saw what the witnesses' budgets did
   not. A risk (``felt`` false: headers held while TTFT is as direct, a timeout not yet fired)
   never makes the class: a healthy verdict names its risks. Over budget in one class beside a
   severe felt finding of another, the verdict says, with the numbers, why it chose its class. A
   path whose requests mostly fail is never healthy. An adaptive run that ended before its
   stopping rule could show the p90 within budget is healthy "so far", not conclusive.
5. **One remediation.** The finding whose ``cause`` explains the largest component of the
   symptom's decomposition (most severe first; ``FALLBACK_CAUSES`` when no direct cause fired);
   else the most severe finding of the symptom's class. The renderers list the other findings.
   Requests cancelled by an interrupt are not failures: they are counted apart.

Modules, numbers first and words last (each imports only those above it):

- ``felt``: what each witness felt against its budget (``Felt``), a gateway's bursts, a run that
  ended before it could show the p90 within budget (steps 1 and 3's facts).
- ``failures``: failed requests per path, and the paths that mostly failed.
- ``split``: the two decompositions (step 2).
- ``cases``: the types the decision hands to its wording (why a symptom, a trade-off, why no latency).
- ``remedy``: which finding explains the dominant component, and a compound incident's trade (step 5).
- ``missing``, ``wording``, ``headline``: every text the verdict carries: the evidence that would
  complete it, the phrases and reasoning lines, and the one summary sentence.
- ``decide``: ``classify`` and the symptom (steps 3 and 4), which builds no sentence.

Where this departs from the design anchors' classifier (§9.6, one module that picks the dominant
symptom): the anchors score symptoms by summing the severity weights of failing findings. Here the
witnesses' latency against the budget decides, and findings decide only within budget (step 4):
the budget is what users feel, which no sum of severity weights measures. And the
anchors keep the classifier in one module; it is a package here because its wording outgrew its
decision, which ruff keeps apart (a rule's logic, its ``Violation::message()``), so that a change of
a sentence never means reading the decision, and the reverse.
"""

from __future__ import annotations

from doctor.verdict.decide import classify

__all__ = ["classify"]
