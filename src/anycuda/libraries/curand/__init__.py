"""anycuda's cuRAND host API: bit generators exact to cuRAND's device API (bits.py), its
distributions (distributions.py), generators with their options and rules (generator.py), and
the table of C functions the drop-in libcurand answers (functions.py)."""
