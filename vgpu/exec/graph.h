// CUDA graphs: graphs built node by node or by stream capture, their instantiation, and their
// launch into a stream. OWNER: the execution helper.
//
// A node keeps the Work it stands for (recorded from a captured submit(), or built by
// cuGraphAdd*Node), so a launch replays exactly what direct submission would have run: the
// real effects in one topological order on the launch stream, and in virtual time each node
// after its own dependencies only, so independent branches overlap as they would on a GPU.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/handle_table.h"
#include "core/stream_work.h"
#include "driver/cuda_api.h"

namespace vgpu {

class DriverState;

struct GraphNode {
  CUgraphNode handle = nullptr;
  CUgraph graph = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  Work work;                        // kernel / memcpy / memset / host / empty
  CUevent event = nullptr;          // event record / wait nodes
  std::vector<CUgraphNode> deps;    // nodes of the same graph; guarded by Graph::mu
};

struct Graph {
  CUgraph handle = nullptr;
  mutable std::mutex mu;
  std::vector<std::shared_ptr<GraphNode>> nodes;  // in creation order
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
  std::vector<LaunchItem> items;  // topologically sorted snapshot of the graph
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

  CUresult instantiate(CUgraph graph, CUgraphExec* out);
  CUresult destroy_exec(CUgraphExec exec);
  CUresult launch(CUgraphExec exec, CUstream stream, bool per_thread);
  std::shared_ptr<GraphExec> find_exec(CUgraphExec exec) const { return execs_.find(exec); }

  // The node type a captured or added Work stands for.
  static CUgraphNodeType node_type_of(const Work& work);

 private:
  DriverState& driver_;
  HandleTable<Graph> graphs_;
  HandleTable<GraphNode> nodes_;
  HandleTable<GraphExec> execs_;
};

}  // namespace vgpu
