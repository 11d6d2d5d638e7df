"""anycuda's libcufftw: FFTW3's interface as NVIDIA's cuFFTW offers it, on host memory, answered by scipy.fft."""
