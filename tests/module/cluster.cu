// Kernels with launch attributes that exist only from sm_90 on (thread block clusters).
extern "C" __global__ void __cluster_dims__(2, 1, 1) k_cluster(int* p) { p[threadIdx.x] = 1; }
extern "C" __global__ void __launch_bounds__(128, 1, 4) k_cluster_rank(int* p) { p[threadIdx.x] = 2; }
