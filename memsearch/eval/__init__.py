"""`memsearch eval`: benchmark datasets, retrieval metrics and plain baselines.

The modules are pure (no store, no model): `datasets` reads LoCoMo, LongMemEval and chat JSONL into
typed records, `metrics` scores rankings and aggregates them, `baseline` ranks with plain BM25.
"""
