// CUDA graphs: graphs built node by node or by stream capture, their instantiation, and their
// launch into a stream. OWNER: the execution helper.
//
// A node keeps the Work it stands for (recorded from a captured submit(), or built by
// cuGraphAdd*Node), so a launch replays exactly what direct submission would have run: the
// real effects in one topological order on the launch stream, and in virtual time each node
// after its own dependencies only, so independent branches overlap as they would on a GPU.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/core/handle_table.h"
#include "sim/core/stream_work.h"
#include "sim/exec/user_objects.h"
#include "front/launch/launch_signature.h"
#include "front/driver/cuda_api.h"

namespace vgpu {

class DriverState;

// A kernel node's launch as cuGraphKernelNodeGetParams reports it: its function, shape and a copy
// of its arguments (kernelParams points into it, valid while the node lives).
struct KernelNodeParams {
  CUfunction func = nullptr;
  std::array<unsigned, 3> grid{1, 1, 1}, block{1, 1, 1};
  unsigned shared = 0;
  std::vector<uint8_t> bytes;   // the packed parameter block
  std::vector<void*> pointers;  // one per parameter, into bytes
};

// The kernel launch the calling thread is submitting (ModuleManager::launch holds one around its
// submit): a kernel node a stream capture records from it keeps its parameters. A thread-local
// pointer, set and cleared once a launch.
struct KernelLaunchView {
  CUfunction func = nullptr;
  const LaunchShape* shape = nullptr;
  std::span<const uint8_t> params;
  std::span<const ParamSlot> slots;
};
class KernelLaunchScope {
 public:
  explicit KernelLaunchScope(const KernelLaunchView* launch);
  ~KernelLaunchScope();
  KernelLaunchScope(const KernelLaunchScope&) = delete;
  KernelLaunchScope& operator=(const KernelLaunchScope&) = delete;

 private:
  const KernelLaunchView* previous_;
};

struct GraphNode {
  CUgraphNode handle = nullptr;
  CUgraph graph = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  Work work;                        // kernel / memcpy / memset / host / empty
  CUevent event = nullptr;          // event record / wait nodes
  std::vector<CUgraphNode> deps;    // nodes of the same graph; guarded by Graph::mu
  // Conditional nodes: the body graphs (destroyed with the node's graph) and the value their
  // condition has at launch.
  std::vector<CUgraph> bodies;
  CUgraphConditionalNodeType cond_type = CU_GRAPH_COND_TYPE_IF;
  unsigned int cond_value = 0;
  // Kernel nodes recorded from a launch (stream capture, cuGraphAddKernelNode): what it launches.
  std::shared_ptr<const KernelNodeParams> kernel_params;
};

struct Graph {
  CUgraph handle = nullptr;
  mutable std::mutex mu;
  std::vector<std::shared_ptr<GraphNode>> nodes;  // in creation order
  std::vector<CUdeviceptr> allocations;            // by its memory allocation nodes
  std::unordered_map<CUgraphConditionalHandle, unsigned int> conditionals;  // handle -> launch value
  UserObjects::References user_objects;  // cuGraphRetainUserObject's references
};

// One step of a launch, as StreamManager::submit_items() takes it.
struct LaunchItem {
  enum class Kind { work, event_record, event_wait };
  Kind kind = Kind::work;
  Work work;
  CUevent event = nullptr;
  std::vector<int> deps;  // indices of earlier items; none: after the stream's previous work
};

struct GraphExec {
  CUgraphExec handle = nullptr;
  mutable std::mutex mu;               // guards items' work against cuGraphExec*SetParams
  std::vector<LaunchItem> items;       // topologically sorted snapshot of the graph
  std::vector<CUgraphNode> nodes;      // the graph node each item was made from
  UserObjects::References user_objects;  // the graph's references when it was instantiated
};

// Memory a graph's allocation node reserved (cuGraphAddMemAllocNode): freed with the graph
// (or by the program's cuMemFree), so its address stays valid for every launch.
struct GraphMemory {
  CUdeviceptr ptr = 0;
};

class GraphManager {
 public:
  explicit GraphManager(DriverState& driver);
  ~GraphManager();

  CUresult create(CUgraph* out);
  CUresult destroy(CUgraph graph);
  std::shared_ptr<Graph> find(CUgraph graph) const { return graphs_.find(graph); }
  std::shared_ptr<GraphNode> find_node(CUgraphNode node) const { return nodes_.find(node); }

  // Add a node to `graph` after `deps` (nodes of that graph: CUDA_ERROR_INVALID_VALUE
  // otherwise). Used by the cuGraphAdd*Node entry points and by stream capture.
  CUresult add_node(CUgraph graph, CUgraphNodeType type, Work work, CUevent event,
                    const CUgraphNode* deps, size_t num_deps, CUgraphNode* out);
  CUresult add_dependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to,
                            size_t count);
  CUresult destroy_node(CUgraphNode node);

  // Graph queries with CUDA's two-call convention (null array: report the count).
  CUresult get_nodes(CUgraph graph, CUgraphNode* nodes, size_t* count, bool roots_only) const;
  CUresult get_edges(CUgraph graph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* data,
                     size_t* count) const;

  // cuGraphClone: the same nodes and edges under new handles.
  CUresult clone(CUgraph original, CUgraph* out);
  // cuGraphExec*SetParams: the item made from `node` runs `work` from now on (same node type).
  // A captured NCCL kernel's node given the parameters of an NCCL kernel again keeps its
  // collective's timing and transfers (nccl_collectives.h): the new arguments cannot tell them.
  CUresult set_exec_work(CUgraphExec exec, CUgraphNode node, Work work);
  // cuGraphExecUpdate: `exec` runs `graph`'s nodes' work from now on, where `graph` has the same
  // nodes as the graph `exec` was instantiated from (taken in the same topological order: the same
  // count, node types and edges; else CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE with *result, and
  // *error_node where a node tells). Each node's work is replaced as set_exec_work does.
  CUresult update_exec(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResult* result, CUgraphNode* error_node);
  // cuGraphKernelNodeGetParams: CUDA_ERROR_INVALID_VALUE for a node that is not a kernel's, or
  // one whose launch was not recorded (a kernel node inlined from a graph launched into a capture).
  CUresult kernel_params(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* out) const;
  // Memory of an allocation node, freed with the graph.
  CUresult own_allocation(CUgraph graph, CUdeviceptr ptr);

  // Conditional nodes (cuGraphConditionalHandleCreate, cuGraphAddNode of type CONDITIONAL).
  CUresult conditional_handle(CUgraph graph, unsigned int default_value, unsigned int flags,
                              CUgraphConditionalHandle* out);
  CUresult add_conditional(CUgraph graph, const CUgraphNode* deps, size_t num_deps,
                           CUDA_CONDITIONAL_NODE_PARAMS& params, CUgraphNode* out);

  CUresult instantiate(CUgraph graph, CUgraphExec* out);
  CUresult destroy_exec(CUgraphExec exec);
  CUresult launch(CUgraphExec exec, CUstream stream, bool per_thread);
  std::shared_ptr<GraphExec> find_exec(CUgraphExec exec) const { return execs_.find(exec); }

  // User objects (user_objects.h); a graph's references go with it, and an executable graph
  // holds its own copy of them from its instantiation to its destruction.
  UserObjects& user_objects() { return user_objects_; }
  CUresult retain_user_object(CUgraph graph, CUuserObject object, unsigned count, unsigned flags);
  CUresult release_user_object(CUgraph graph, CUuserObject object, unsigned count);

  // The node type a captured or added Work stands for.
  static CUgraphNodeType node_type_of(const Work& work);

 private:
  CUresult append_items(const Graph& g, const std::vector<int>& root_deps, GraphExec& exec,
                        std::vector<int>* sinks, int depth) const;
  CUgraph conditional_body(const GraphNode& node) const;

  DriverState& driver_;
  UserObjects user_objects_;  // before the tables: the graphs' references are its
  HandleTable<Graph> graphs_;
  HandleTable<GraphNode> nodes_;
  HandleTable<GraphExec> execs_;
};

}  // namespace vgpu
