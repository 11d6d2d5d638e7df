"""anycuda's cuRAND: the host API's generators, orderings and distributions on the CPU."""
