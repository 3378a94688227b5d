"""What goes into a store: JSONL records with line numbers (`records`), conversation readers
(`readers`), conversations as memories with their views and facets (`conversations`) and the
embedding of distinct texts with near-duplicate detection (`embed`).

The product and the benchmarks (`memsearch.eval`) both use this package; it never imports `eval`.
"""
