"""Front ends that keep one warm `Memsearch` in a long-running process: an MCP server (`mcp.py`)
and an HTTP JSON API (`http.py`). Both only translate requests into library calls."""
