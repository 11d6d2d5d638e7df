// One compare-exchange step (k, j) of a bitonic sorting network over n = 2^m floats,
// one thread per element; the host launches every step.
extern "C" __global__ void bitonic_step(float* data, int j, int k) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned l = i ^ j;
    if (l > i) {
        float a = data[i], b = data[l];
        bool ascending = (i & k) == 0;
        if ((a > b) == ascending) {
            data[i] = b;
            data[l] = a;
        }
    }
}
