"""anycuda's cuFFT: plans (plan.py) over cuFFT's basic and advanced data layouts, executed on
pocketfft through scipy.fft, multi-threaded (execute.py); the extensible API (xt.py: cudaDataType
plans with half and bfloat16, plans over several GPUs) and its memory descriptors
(descriptors.py); and the table of C functions the drop-in libcufft answers (functions.py)."""
