"""What goes into a store: JSONL records with line numbers (`records`), conversation readers
(`readers`), conversations as memories with their views and facets (`conversations`), the
embedding of distinct texts with near-duplicate detection (`embed`), note files as chunks at their
headings (`notes`) and the walk and incremental plan of indexing folders of them (`note_files`).

The product and the benchmarks (`memsearch.eval`) both use this package; it never imports `eval`.
"""
