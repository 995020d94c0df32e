"""The record: declared once (record), built from rounds (cell_records), and the run folder's
layout (runfolder); the store itself is ios_bench.results."""
