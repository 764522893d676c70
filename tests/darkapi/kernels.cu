// A kernel for the module slots' test, built into a fat binary by nvcc at build time.
extern "C" __global__ void darkapi_add_one(int* p) { p[threadIdx.x] += 1; }
