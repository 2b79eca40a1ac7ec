"""Whole corpora through one task (``oasr.batch``; ``oasr batch`` on the command line).

manifest.py (MANIFEST -> inputs), tasks.py (the task table: models, outputs, the work on one
input), worker.py (models loaded once, one record per input), journal.py (OUTDIR/batch.jsonl:
records, skipping what is up to date), local.py and ray_engine.py (the engines), runner.py
(``batch``: the run). The package is not called ``batch`` so it cannot shadow ``oasr.batch``.
"""

from .runner import BatchProgress, BatchSummary, batch

__all__ = ["batch", "BatchProgress", "BatchSummary"]
