// Stream capture, graph building, instantiation and launch on the sim backend.
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace {

#define OK(x) ASSERT_EQ((x), CUDA_SUCCESS)

class Graphs : public ::testing::Test {
 protected:
  void SetUp() override {
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
  }
  CUcontext ctx = nullptr;
};

void CUDA_CB bump(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }

TEST_F(Graphs, CaptureInstantiateLaunchReplays) {
  CUstream s;
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const size_t n = 1 << 20;
  std::vector<unsigned char> in(n, 7), out(n, 0);
  CUdeviceptr d;
  OK(cuMemAlloc(&d, n));
  std::atomic<int> count{0};

  OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st;
  OK(cuStreamIsCapturing(s, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  OK(cuMemcpyHtoDAsync(d, in.data(), n, s));
  OK(cuLaunchHostFunc(s, bump, &count));
  OK(cuMemcpyDtoHAsync(out.data(), d, n, s));
  const CUgraphNode* deps = nullptr;
  size_t ndeps = 0;
  cuuint64_t id = 0;
  CUgraph g_info = nullptr;
  OK(cuStreamGetCaptureInfo_v3(s, &st, &id, &g_info, &deps, nullptr, &ndeps));
  EXPECT_EQ(ndeps, 1u);
  EXPECT_NE(id, 0u);
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);  // invalidates
  CUgraph g = nullptr;
  EXPECT_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(count.load(), 0);

  OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  OK(cuMemcpyHtoDAsync(d, in.data(), n, s));
  OK(cuLaunchHostFunc(s, bump, &count));
  OK(cuMemcpyDtoHAsync(out.data(), d, n, s));
  OK(cuStreamEndCapture(s, &g));
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(count.load(), 0);  // captured, not run
  EXPECT_EQ(out[0], 0);
  size_t nodes = 0;
  OK(cuGraphGetNodes(g, nullptr, &nodes));
  EXPECT_EQ(nodes, 3u);
  size_t roots = 0;
  OK(cuGraphGetRootNodes(g, nullptr, &roots));
  EXPECT_EQ(roots, 1u);
  CUgraphNode root;
  OK(cuGraphGetRootNodes(g, &root, &roots));
  CUgraphNodeType type;
  OK(cuGraphNodeGetType(root, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_MEMCPY);
  size_t edges = 0;
  OK(cuGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
  EXPECT_EQ(edges, 2u);

  CUgraphExec exec;
  OK(cuGraphInstantiateWithFlags(&exec, g, 0));
  OK(cuGraphLaunch(exec, s));
  OK(cuGraphLaunch(exec, s));
  OK(cuStreamSynchronize(s));
  EXPECT_EQ(count.load(), 2);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[n - 1], 7);
  OK(cuGraphExecDestroy(exec));
  OK(cuGraphDestroy(g));
  EXPECT_EQ(cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemFree(d));
  OK(cuStreamDestroy(s));
}

// The same fork/join work, submitted directly and launched from a captured graph, takes the
// same virtual time.
TEST_F(Graphs, GraphLaunchTakesTheSameVirtualTimeAsDirectSubmission) {
  CUstream a, b;
  OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  const size_t n = 8 << 20;
  std::vector<unsigned char> host(2 * n, 3);
  CUdeviceptr d;
  OK(cuMemAlloc(&d, 2 * n));
  CUevent fork, join, t0, t1;
  for (CUevent* e : {&fork, &join, &t0, &t1}) OK(cuEventCreate(e, 0));
  auto work = [&] {
    OK(cuEventRecord(fork, a));
    OK(cuStreamWaitEvent(b, fork, 0));
    OK(cuMemcpyHtoDAsync(d, host.data(), n, a));
    OK(cuMemcpyHtoDAsync(d + n, host.data() + n, n, b));
    OK(cuMemcpyHtoDAsync(d, host.data(), n, a));
    OK(cuEventRecord(join, b));
    OK(cuStreamWaitEvent(a, join, 0));
  };
  std::vector<unsigned char> big(32 << 20, 0);  // keeps the stream behind the host thread
  CUdeviceptr dbig;
  OK(cuMemAlloc(&dbig, big.size()));
  OK(cuMemcpyHtoDAsync(dbig, big.data(), big.size(), a));
  OK(cuEventRecord(t0, a));
  work();
  OK(cuEventRecord(t1, a));
  OK(cuCtxSynchronize());
  float direct = 0;
  OK(cuEventElapsedTime(&direct, t0, t1));

  OK(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
  work();
  CUgraph g;
  OK(cuStreamEndCapture(a, &g));
  size_t nodes = 0;
  OK(cuGraphGetNodes(g, nullptr, &nodes));
  EXPECT_EQ(nodes, 3u);
  size_t roots = 0;
  OK(cuGraphGetRootNodes(g, nullptr, &roots));
  EXPECT_EQ(roots, 2u);  // the two streams' first copies
  CUstreamCaptureStatus st;
  OK(cuStreamIsCapturing(b, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);  // the joined stream left the capture too
  CUgraphExec exec;
  OK(cuGraphInstantiate(&exec, g, 0));
  OK(cuMemcpyHtoDAsync(dbig, big.data(), big.size(), a));
  OK(cuEventRecord(t0, a));
  OK(cuGraphLaunch(exec, a));
  OK(cuEventRecord(t1, a));
  OK(cuStreamSynchronize(a));
  float graph = 0;
  OK(cuEventElapsedTime(&graph, t0, t1));
  EXPECT_NEAR(graph, direct, direct * 0.01);
  const float one = static_cast<float>((2e-6 + n / (63e9 * 0.87)) * 1e3);  // PCIe x [pcie] efficiency
  EXPECT_NEAR(graph, 2 * one, one * 0.1);  // two copies in a row, the third beside them
  OK(cuGraphExecDestroy(exec));
  OK(cuGraphDestroy(g));
  OK(cuMemFree(d));
  OK(cuMemFree(dbig));
  OK(cuStreamDestroy(a));
  OK(cuStreamDestroy(b));
}

TEST_F(Graphs, BuiltByHandWithDependencies) {
  CUgraph g;
  OK(cuGraphCreate(&g, 0));
  std::atomic<int> count{0};
  CUDA_HOST_NODE_PARAMS hp{bump, &count};
  CUgraphNode h1, h2, e, m;
  OK(cuGraphAddHostNode(&h1, g, nullptr, 0, &hp));
  OK(cuGraphAddEmptyNode(&e, g, &h1, 1));
  OK(cuGraphAddHostNode(&h2, g, nullptr, 0, &hp));
  OK(cuGraphAddDependencies(g, &e, &h2, nullptr, 1));
  EXPECT_EQ(cuGraphAddDependencies(g, &e, &h2, nullptr, 1), CUDA_ERROR_INVALID_VALUE);  // exists
  CUdeviceptr d;
  OK(cuMemAlloc(&d, 1024));
  CUDA_MEMSET_NODE_PARAMS mp{};
  mp.dst = d;
  mp.elementSize = 4;
  mp.width = 256;
  mp.height = 1;
  mp.value = 0xabcdef01;
  OK(cuGraphAddMemsetNode(&m, g, &h2, 1, &mp, ctx));
  CUgraphNodeType t;
  OK(cuGraphNodeGetType(m, &t));
  EXPECT_EQ(t, CU_GRAPH_NODE_TYPE_MEMSET);
  size_t edges = 0;
  OK(cuGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
  EXPECT_EQ(edges, 3u);
  CUgraphExec exec;
  OK(cuGraphInstantiateWithFlags(&exec, g, 0));
  OK(cuGraphLaunch(exec, nullptr));
  OK(cuStreamSynchronize(nullptr));
  EXPECT_EQ(count.load(), 2);
  unsigned back[256] = {};
  OK(cuMemcpyDtoH(back, d, sizeof back));
  EXPECT_EQ(back[0], 0xabcdef01u);
  EXPECT_EQ(back[255], 0xabcdef01u);
  // A cycle is refused at instantiation.
  OK(cuGraphAddDependencies(g, &h2, &h1, nullptr, 1));
  CUgraphExec bad;
  EXPECT_EQ(cuGraphInstantiateWithFlags(&bad, g, 0), CUDA_ERROR_INVALID_VALUE);
  OK(cuGraphExecDestroy(exec));
  OK(cuGraphDestroy(g));
  EXPECT_EQ(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphNodeGetType(m, &t), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemFree(d));
}

TEST_F(Graphs, CaptureErrors) {
  EXPECT_EQ(cuStreamBeginCapture_v2(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);  // the legacy stream
  CUstream s;
  OK(cuStreamCreate(&s, 0));
  CUgraph g;
  EXPECT_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
  OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  OK(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
  OK(cuThreadExchangeStreamCaptureMode(&mode));
  OK(cuStreamEndCapture(s, &g));
  OK(cuGraphDestroy(g));
  OK(cuStreamDestroy(s));
}

}  // namespace

namespace {

// A user object's destructor: counts its runs and notes the thread it ran on.
struct Destroyed {
  std::atomic<int> runs{0};
  std::atomic<std::thread::id> thread{};
};
void CUDA_CB note_destroyed(void* p) {
  auto* d = static_cast<Destroyed*>(p);
  d->thread = std::this_thread::get_id();
  d->runs.fetch_add(1);
}
// Waits (up to 5 s of real time) for the driver's thread to run `n` destructors.
bool ran(const Destroyed& d, int n) {
  for (int i = 0; i < 5000 && d.runs.load() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return d.runs.load() == n;
}

}  // namespace

// User objects (NCCL ties a captured collective's plan to its graph with one): the destructor
// runs once, when the last reference goes, on a thread of the driver's, never on the caller's.
TEST_F(Graphs, AUserObjectIsDestroyedOnceWithItsLastReference) {
  Destroyed d;
  CUuserObject o = nullptr;
  EXPECT_EQ(cuUserObjectCreate(&o, &d, note_destroyed, 1, 0), CUDA_ERROR_INVALID_VALUE);  // the flag is required
  EXPECT_EQ(cuUserObjectCreate(&o, &d, note_destroyed, 0, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuUserObjectCreate(nullptr, &d, note_destroyed, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), CUDA_ERROR_INVALID_VALUE);
  OK(cuUserObjectCreate(&o, &d, note_destroyed, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  OK(cuUserObjectRetain(o, 1));
  EXPECT_EQ(cuUserObjectRetain(o, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuUserObjectRelease(o, 4), CUDA_ERROR_INVALID_VALUE);  // more than it holds: nothing released
  OK(cuUserObjectRelease(o, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(d.runs.load(), 0);
  OK(cuUserObjectRelease(o, 1));
  ASSERT_TRUE(ran(d, 1));
  EXPECT_NE(d.thread.load(), std::this_thread::get_id());
  EXPECT_EQ(cuUserObjectRelease(o, 1), CUDA_ERROR_INVALID_VALUE);  // gone
  EXPECT_EQ(cuUserObjectRetain(reinterpret_cast<CUuserObject>(&d), 1), CUDA_ERROR_INVALID_VALUE);  // not a handle
}

// A graph's references go with the graph; an executable graph made from it holds its own until
// it is destroyed, and so does a clone; CU_GRAPH_USER_OBJECT_MOVE hands the caller's over.
TEST_F(Graphs, GraphsAndTheirExecutablesHoldUserObjectReferences) {
  Destroyed d;
  CUuserObject o = nullptr;
  OK(cuUserObjectCreate(&o, &d, note_destroyed, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CUgraph g = nullptr, clone = nullptr;
  OK(cuGraphCreate(&g, 0));
  EXPECT_EQ(cuGraphRetainUserObject(g, o, 1, 0x8), CUDA_ERROR_INVALID_VALUE);  // an unknown flag
  OK(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));  // the caller's only reference
  OK(cuGraphRetainUserObject(g, o, 2, 0));                           // two new ones
  EXPECT_EQ(cuGraphReleaseUserObject(g, o, 4), CUDA_ERROR_INVALID_VALUE);  // it holds three
  OK(cuGraphReleaseUserObject(g, o, 2));
  CUgraphExec exec = nullptr;
  OK(cuGraphInstantiateWithFlags(&exec, g, 0));
  OK(cuGraphClone(&clone, g));
  OK(cuGraphDestroy(g));
  OK(cuGraphDestroy(clone));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(d.runs.load(), 0);  // the executable graph still holds it
  OK(cuGraphExecDestroy(exec));
  ASSERT_TRUE(ran(d, 1));
}
