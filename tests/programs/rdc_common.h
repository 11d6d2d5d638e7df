template <typename T> __device__ T twice(T v) { return v + v; }    // instantiated in both units: weak
