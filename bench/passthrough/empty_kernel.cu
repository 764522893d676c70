// The kernel the call-overhead bench launches: it does nothing, so the host side is all there is.
extern "C" __global__ void empty() {}
