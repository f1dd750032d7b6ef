"""A sweep shown: its summary as text (text), its figures (figures), its records and cells as
DataFrames (frames), and sweeps side by side and beside the paper's figure (compare)."""
