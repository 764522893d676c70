// The kernels the call-overhead bench launches: they do nothing, so the host side is all there is.
extern "C" __global__ void empty() {}
// The same under a name as long as PyTorch's templated kernels have (249 bytes): vgpu's
// launch signature and its lookups carry the name.
extern "C" __global__ void empty_as_long_as_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_pytorch_vectorized_elementwise_kernel_name() {}
