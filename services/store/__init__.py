"""Where a sweep's results are kept: its home (state), the result cache (cache), MLflow (tracking,
uris), atomic files (files), and the readers of MLflow records older versions wrote (legacy)."""
