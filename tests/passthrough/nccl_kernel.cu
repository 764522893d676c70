// A kernel named as NCCL names its device kernels, for the NCCL timing test: the passthrough
// times kernels of such names by the transfers of their launch, not by their real duration.
extern "C" __global__ void ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE(int* flag) {
  if (flag != nullptr) *flag = 1;
}
