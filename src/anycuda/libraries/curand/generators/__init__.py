"""One module per cuRAND generator: the algorithm of each (state, step, skip-ahead) and its
engine, which lays the host API's results out in memory from the generator's subsequences
(layout.py says how)."""
