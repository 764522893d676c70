#include "exec/graph.h"

#include <algorithm>

#include "common/log.h"
#include "core/driver_state.h"
#include "exec/stream.h"

namespace vgpu {

GraphManager::GraphManager(DriverState& driver) : driver_(driver) {}
GraphManager::~GraphManager() = default;

CUgraphNodeType GraphManager::node_type_of(const Work& work) {
  switch (work.kind) {
    case Work::Kind::kernel: return CU_GRAPH_NODE_TYPE_KERNEL;
    case Work::Kind::copy: return CU_GRAPH_NODE_TYPE_MEMCPY;
    case Work::Kind::memset: return CU_GRAPH_NODE_TYPE_MEMSET;
    case Work::Kind::host_function: return CU_GRAPH_NODE_TYPE_HOST;
    case Work::Kind::wait:
    case Work::Kind::other: break;
  }
  return CU_GRAPH_NODE_TYPE_EMPTY;
}

CUresult GraphManager::create(CUgraph* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto g = std::make_shared<Graph>();
  g->handle = mint_handle<CUgraph>(HandleKind::graph);
  graphs_.add(g->handle, g);
  *out = g->handle;
  return CUDA_SUCCESS;
}

CUresult GraphManager::destroy(CUgraph graph) {
  auto g = graphs_.remove(graph);
  if (!g) {
    log::warn("cuGraphDestroy: {} is not a live graph", static_cast<const void*>(graph));
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(g->mu);
  for (auto& n : g->nodes) nodes_.remove(n->handle);
  g->nodes.clear();
  return CUDA_SUCCESS;
}

CUresult GraphManager::add_node(CUgraph graph, CUgraphNodeType type, Work work, CUevent event,
                                const CUgraphNode* deps, size_t num_deps, CUgraphNode* out) {
  if (out == nullptr || (num_deps > 0 && deps == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(graph);
  if (!g) {
    log::warn("graph node: {} is not a live graph", static_cast<const void*>(graph));
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto n = std::make_shared<GraphNode>();
  for (size_t i = 0; i < num_deps; ++i) {
    auto d = nodes_.find(deps[i]);
    if (!d || d->graph != graph) {
      log::warn("graph node: dependency {} is not a node of this graph",
                static_cast<const void*>(deps[i]));
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (std::find(n->deps.begin(), n->deps.end(), deps[i]) != n->deps.end())
      return CUDA_ERROR_INVALID_VALUE;  // duplicate dependency, as the real driver refuses
    n->deps.push_back(deps[i]);
  }
  n->handle = mint_handle<CUgraphNode>(HandleKind::graph_node);
  n->graph = graph;
  n->type = type;
  n->work = std::move(work);
  n->event = event;
  {
    std::lock_guard lock(g->mu);
    g->nodes.push_back(n);
  }
  nodes_.add(n->handle, n);
  *out = n->handle;
  return CUDA_SUCCESS;
}

CUresult GraphManager::add_dependencies(CUgraph graph, const CUgraphNode* from,
                                        const CUgraphNode* to, size_t count) {
  if (count > 0 && (from == nullptr || to == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  // Validate all, then apply all: an error adds nothing.
  std::vector<std::shared_ptr<GraphNode>> tos(count);
  for (size_t i = 0; i < count; ++i) {
    auto f = nodes_.find(from[i]);
    tos[i] = nodes_.find(to[i]);
    if (!f || !tos[i] || f->graph != graph || tos[i]->graph != graph || from[i] == to[i])
      return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(g->mu);
  for (size_t i = 0; i < count; ++i)
    if (std::find(tos[i]->deps.begin(), tos[i]->deps.end(), from[i]) != tos[i]->deps.end())
      return CUDA_ERROR_INVALID_VALUE;  // the edge exists already
  for (size_t i = 0; i < count; ++i) tos[i]->deps.push_back(from[i]);
  return CUDA_SUCCESS;
}

CUresult GraphManager::destroy_node(CUgraphNode node) {
  auto n = nodes_.remove(node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(n->graph);
  if (!g) return CUDA_SUCCESS;
  std::lock_guard lock(g->mu);
  g->nodes.erase(std::remove(g->nodes.begin(), g->nodes.end(), n), g->nodes.end());
  for (auto& m : g->nodes) m->deps.erase(std::remove(m->deps.begin(), m->deps.end(), node), m->deps.end());
  return CUDA_SUCCESS;
}

CUresult GraphManager::get_nodes(CUgraph graph, CUgraphNode* out, size_t* count,
                                 bool roots_only) const {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(g->mu);
  std::vector<CUgraphNode> list;
  for (auto& n : g->nodes)
    if (!roots_only || n->deps.empty()) list.push_back(n->handle);
  if (out == nullptr) {
    *count = list.size();
    return CUDA_SUCCESS;
  }
  const size_t k = std::min(*count, list.size());
  std::copy_n(list.begin(), k, out);
  for (size_t i = k; i < *count; ++i) out[i] = nullptr;
  *count = list.size() < *count ? list.size() : *count;
  return CUDA_SUCCESS;
}

CUresult GraphManager::get_edges(CUgraph graph, CUgraphNode* from, CUgraphNode* to,
                                 CUgraphEdgeData* data, size_t* count) const {
  if (count == nullptr || ((from == nullptr) != (to == nullptr))) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(g->mu);
  std::vector<std::pair<CUgraphNode, CUgraphNode>> edges;
  for (auto& n : g->nodes)
    for (auto d : n->deps) edges.emplace_back(d, n->handle);
  if (from == nullptr) {
    *count = edges.size();
    return CUDA_SUCCESS;
  }
  const size_t k = std::min(*count, edges.size());
  for (size_t i = 0; i < *count; ++i) {
    from[i] = i < k ? edges[i].first : nullptr;
    to[i] = i < k ? edges[i].second : nullptr;
    if (data) data[i] = CUgraphEdgeData{};
  }
  *count = k;
  return CUDA_SUCCESS;
}

CUresult GraphManager::instantiate(CUgraph graph, CUgraphExec* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  auto exec = std::make_shared<GraphExec>();
  {
    // Kahn's algorithm, stable in creation order, so replays are deterministic.
    std::lock_guard lock(g->mu);
    const size_t n = g->nodes.size();
    std::unordered_map<CUgraphNode, size_t> index;
    for (size_t i = 0; i < n; ++i) index[g->nodes[i]->handle] = i;
    std::vector<int> pending(n, 0), order_of(n, -1);
    std::vector<std::vector<size_t>> succ(n);
    for (size_t i = 0; i < n; ++i)
      for (auto d : g->nodes[i]->deps) {
        auto it = index.find(d);
        if (it == index.end()) continue;
        succ[it->second].push_back(i);
        ++pending[i];
      }
    std::vector<size_t> ready;
    for (size_t i = 0; i < n; ++i)
      if (pending[i] == 0) ready.push_back(i);
    std::vector<size_t> order;
    for (size_t r = 0; r < ready.size(); ++r) {
      const size_t i = ready[r];
      order_of[i] = static_cast<int>(order.size());
      order.push_back(i);
      for (size_t j : succ[i])
        if (--pending[j] == 0) ready.push_back(j);
    }
    if (order.size() != n) {
      log::warn("cuGraphInstantiate: the graph has a cycle");
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i : order) {
      const GraphNode& node = *g->nodes[i];
      LaunchItem item;
      item.kind = node.type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? LaunchItem::Kind::event_record
                  : node.type == CU_GRAPH_NODE_TYPE_WAIT_EVENT ? LaunchItem::Kind::event_wait
                                                               : LaunchItem::Kind::work;
      item.work = node.work;
      item.event = node.event;
      for (auto d : node.deps)
        if (auto it = index.find(d); it != index.end()) item.deps.push_back(order_of[it->second]);
      exec->items.push_back(std::move(item));
    }
  }
  exec->handle = mint_handle<CUgraphExec>(HandleKind::graph_exec);
  execs_.add(exec->handle, exec);
  *out = exec->handle;
  return CUDA_SUCCESS;
}

CUresult GraphManager::destroy_exec(CUgraphExec exec) {
  if (!execs_.remove(exec)) {
    log::warn("cuGraphExecDestroy: {} is not a live executable graph", static_cast<const void*>(exec));
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult GraphManager::launch(CUgraphExec exec, CUstream stream, bool per_thread) {
  auto e = execs_.find(exec);
  if (!e) {
    log::warn("cuGraphLaunch: {} is not a live executable graph", static_cast<const void*>(exec));
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<LaunchItem> items = e->items;  // each launch runs its own copy of the work
  return driver_.streams().submit_items(stream, std::move(items), per_thread);
}

}  // namespace vgpu
