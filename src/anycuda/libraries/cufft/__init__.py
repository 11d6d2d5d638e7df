"""anycuda's cuFFT: plans (plan.py) over cuFFT's basic and advanced data layouts (layout.py),
executed on pocketfft through scipy.fft, multi-threaded (execute.py), and the table of C
functions the drop-in libcufft answers (functions.py)."""
