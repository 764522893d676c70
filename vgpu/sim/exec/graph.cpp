#include "sim/exec/graph.h"

#include <algorithm>

#include "common/log.h"
#include "sim/core/driver_state.h"
#include "sim/exec/nccl_collectives.h"
#include "sim/exec/stream.h"
#include "sim/memory/memory.h"

#include <unordered_map>

namespace vgpu {

namespace {
thread_local const KernelLaunchView* t_kernel_launch = nullptr;

// The parameters of the launch being submitted, for a kernel node recorded from it (null: none).
std::shared_ptr<const KernelNodeParams> params_of_current_launch() {
  const KernelLaunchView* v = t_kernel_launch;
  if (v == nullptr || v->shape == nullptr) return nullptr;
  auto p = std::make_shared<KernelNodeParams>();
  p->func = v->func;
  p->grid = {v->shape->grid[0], v->shape->grid[1], v->shape->grid[2]};
  p->block = {v->shape->block[0], v->shape->block[1], v->shape->block[2]};
  p->shared = v->shape->dynamic_shared;
  p->bytes.assign(v->params.begin(), v->params.end());
  for (const ParamSlot& slot : v->slots)
    p->pointers.push_back(slot.offset < p->bytes.size() ? p->bytes.data() + slot.offset : nullptr);
  return p;
}
}  // namespace

KernelLaunchScope::KernelLaunchScope(const KernelLaunchView* launch) : previous_(t_kernel_launch) {
  t_kernel_launch = launch;
}
KernelLaunchScope::~KernelLaunchScope() { t_kernel_launch = previous_; }

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
  std::vector<CUgraph> bodies;
  std::lock_guard lock(g->mu);
  for (auto& n : g->nodes) {
    nodes_.remove(n->handle);
    bodies.insert(bodies.end(), n->bodies.begin(), n->bodies.end());
  }
  g->nodes.clear();
  user_objects_.release_all(g->user_objects);
  for (CUgraph b : bodies) destroy(b);  // a conditional node's body graphs are the node's
  // Allocation nodes' memory goes with the graph (unless the program freed it already).
  for (CUdeviceptr p : g->allocations) driver_.memory().free_device(p);
  g->allocations.clear();
  return CUDA_SUCCESS;
}

CUresult GraphManager::clone(CUgraph original, CUgraph* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(original);
  if (!g) {
    log::warn("cuGraphClone: {} is not a live graph", static_cast<const void*>(original));
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUgraph copy = nullptr;
  if (CUresult r = create(&copy); r != CUDA_SUCCESS) return r;
  std::vector<std::shared_ptr<GraphNode>> nodes;
  {
    std::lock_guard lock(g->mu);
    nodes = g->nodes;
    if (auto c = graphs_.find(copy)) {
      std::lock_guard copy_lock(c->mu);
      c->conditionals = g->conditionals;  // the handles stay usable on the clone
      c->user_objects = user_objects_.retain_all(g->user_objects);  // and it owns references too
    }
  }
  // Creation order puts every node after its dependencies only for graphs built by capture;
  // edges added later may point forward, so nodes are made first and wired afterwards.
  std::unordered_map<CUgraphNode, CUgraphNode> made;
  for (const auto& n : nodes) {
    CUgraphNode h = nullptr;
    if (CUresult r = add_node(copy, n->type, n->work, n->event, nullptr, 0, &h); r != CUDA_SUCCESS) {
      destroy(copy);
      return r;
    }
    made[n->handle] = h;
    if (n->kernel_params)
      if (auto m = nodes_.find(h)) m->kernel_params = n->kernel_params;  // immutable: shared
    if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {  // its bodies are cloned with it
      auto m = nodes_.find(h);
      m->cond_type = n->cond_type;
      m->cond_value = n->cond_value;
      for (CUgraph body : n->bodies) {
        CUgraph b = nullptr;
        if (CUresult r = clone(body, &b); r != CUDA_SUCCESS) {
          destroy(copy);
          return r;
        }
        m->bodies.push_back(b);
      }
    }
  }
  for (const auto& n : nodes) {
    std::vector<CUgraphNode> deps;
    {
      std::lock_guard lock(g->mu);
      deps = n->deps;
    }
    for (CUgraphNode d : deps) {
      auto it = made.find(d);
      if (it == made.end()) continue;
      const CUgraphNode to = made[n->handle];
      if (CUresult r = add_dependencies(copy, &it->second, &to, 1); r != CUDA_SUCCESS) {
        destroy(copy);
        return r;
      }
    }
  }
  *out = copy;
  return CUDA_SUCCESS;
}

namespace {
// Whether a node's work `old`, a captured NCCL kernel timed as its collective (its label names the
// operations: "kernel [AllReduce ... B]"), stays when given `work`, an NCCL kernel of parameters
// alone (not launched inside NCCL, so not timed: its label is the kernel's name).
bool keeps_collective(const Work& old, const Work& work) {
  return old.kind == Work::Kind::kernel && work.kind == Work::Kind::kernel && is_nccl_kernel_name(old.label) &&
         is_nccl_kernel_name(work.label) && old.label.find(" [") != std::string::npos &&
         work.label.find(" [") == std::string::npos;
}
}  // namespace

CUresult GraphManager::set_exec_work(CUgraphExec exec, CUgraphNode node, Work work) {
  auto e = execs_.find(exec);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(e->mu);
  for (size_t i = 0; i < e->nodes.size(); ++i)
    if (e->nodes[i] == node) {
      Work& old = e->items[i].work;
      if (node_type_of(old) != node_type_of(work)) return CUDA_ERROR_INVALID_VALUE;
      // A captured NCCL kernel (timed as its collective, labelled with its operations, its
      // transfers placed on each replay) given an NCCL kernel's parameters again: the new
      // arguments are NCCL's device-side work, which tells nothing here (and outside NCCL's
      // launch the plugin names no collective), so the node keeps its collective's timing and
      // transfers; a grid or block change does not alter what the collective model says.
      if (!keeps_collective(old, work)) old = std::move(work);
      return CUDA_SUCCESS;
    }
  log::warn("cuGraphExec*SetParams: the node is not part of the instantiated graph");
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult GraphManager::update_exec(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResult* result,
                                   CUgraphNode* error_node) {
  *result = CU_GRAPH_EXEC_UPDATE_ERROR;
  *error_node = nullptr;
  auto e = execs_.find(exec);
  auto g = graphs_.find(graph);
  if (!e || !g) return CUDA_ERROR_INVALID_VALUE;
  GraphExec fresh;  // what instantiating `graph` would run
  if (CUresult r = append_items(*g, {}, fresh, nullptr, 0); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(e->mu);
  if (fresh.items.size() != e->items.size()) {
    *result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  for (size_t i = 0; i < fresh.items.size(); ++i) {
    const LaunchItem& now = e->items[i];
    const LaunchItem& next = fresh.items[i];
    if (now.kind != next.kind || node_type_of(now.work) != node_type_of(next.work)) {
      *result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
      *error_node = fresh.nodes[i];
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    if (now.deps != next.deps) {
      *result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
      *error_node = fresh.nodes[i];
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
  }
  // Every node checked: replace all (the nodes the executable graph answers to stay its own).
  for (size_t i = 0; i < fresh.items.size(); ++i) {
    LaunchItem& now = e->items[i];
    now.event = fresh.items[i].event;
    if (!keeps_collective(now.work, fresh.items[i].work)) now.work = std::move(fresh.items[i].work);
  }
  *result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  return CUDA_SUCCESS;
}

CUresult GraphManager::kernel_params(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* out) const {
  auto n = nodes_.find(node);
  if (out == nullptr || !n || n->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  const std::shared_ptr<const KernelNodeParams> p = n->kernel_params;
  if (!p) {
    log::warn("cuGraphKernelNodeGetParams: this kernel node's launch was not recorded (a node inlined from a graph "
              "launched into a capture)");
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = CUDA_KERNEL_NODE_PARAMS{};
  out->func = p->func;
  out->gridDimX = p->grid[0];
  out->gridDimY = p->grid[1];
  out->gridDimZ = p->grid[2];
  out->blockDimX = p->block[0];
  out->blockDimY = p->block[1];
  out->blockDimZ = p->block[2];
  out->sharedMemBytes = p->shared;
  // The driver's own copy, as the real one hands out (the caller reads, never writes, it).
  out->kernelParams = const_cast<void**>(p->pointers.data());
  out->extra = nullptr;
  return CUDA_SUCCESS;
}

CUresult GraphManager::own_allocation(CUgraph graph, CUdeviceptr ptr) {
  auto g = graphs_.find(graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(g->mu);
  g->allocations.push_back(ptr);
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
  if (type == CU_GRAPH_NODE_TYPE_KERNEL) n->kernel_params = params_of_current_launch();
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
  for (CUgraph body : n->bodies) destroy(body);  // a conditional node's bodies go with it
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

// Appends the items of `g` to `exec` in one topological order (Kahn's algorithm, stable in
// creation order, so replays are deterministic); the graph's roots come after `root_deps`.
// `sinks` receives the items nothing in `g` depends on. A conditional node expands, in place,
// into the body its condition selects, followed by the node itself as the join point.
CUresult GraphManager::append_items(const Graph& g, const std::vector<int>& root_deps, GraphExec& exec,
                                    std::vector<int>* sinks, int depth) const {
  if (depth > 16) {
    log::warn("cuGraphInstantiate: conditional bodies nest too deep");
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<std::shared_ptr<GraphNode>> nodes;
  std::vector<std::vector<CUgraphNode>> node_deps;
  {
    std::lock_guard lock(g.mu);
    nodes = g.nodes;
    for (const auto& n : nodes) node_deps.push_back(n->deps);
  }
  const size_t n = nodes.size();
  std::unordered_map<CUgraphNode, size_t> index;
  for (size_t i = 0; i < n; ++i) index[nodes[i]->handle] = i;
  std::vector<int> pending(n, 0), item_of(n, -1);
  std::vector<std::vector<size_t>> succ(n);
  for (size_t i = 0; i < n; ++i)
    for (auto d : node_deps[i]) {
      auto it = index.find(d);
      if (it == index.end()) continue;
      succ[it->second].push_back(i);
      ++pending[i];
    }
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) order.push_back(i);
  for (size_t r = 0; r < order.size(); ++r)
    for (size_t j : succ[order[r]])
      if (--pending[j] == 0) order.push_back(j);
  if (order.size() != n) {
    log::warn("cuGraphInstantiate: the graph has a cycle");
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i : order) {
    const GraphNode& node = *nodes[i];
    std::vector<int> deps;
    for (auto d : node_deps[i])
      if (auto it = index.find(d); it != index.end()) deps.push_back(item_of[it->second]);
    if (deps.empty()) deps = root_deps;
    if (node.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      if (CUgraph body = conditional_body(node); body != nullptr) {
        auto bg = graphs_.find(body);
        std::vector<int> body_sinks;
        if (bg) {
          if (CUresult r = append_items(*bg, deps, exec, &body_sinks, depth + 1); r != CUDA_SUCCESS) return r;
          if (!body_sinks.empty()) deps = body_sinks;
        }
      }
    }
    LaunchItem item;
    item.kind = node.type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? LaunchItem::Kind::event_record
                : node.type == CU_GRAPH_NODE_TYPE_WAIT_EVENT ? LaunchItem::Kind::event_wait
                                                             : LaunchItem::Kind::work;
    item.work = node.work;
    item.event = node.event;
    item.deps = std::move(deps);
    item_of[i] = static_cast<int>(exec.items.size());
    exec.items.push_back(std::move(item));
    exec.nodes.push_back(node.handle);
  }
  if (sinks)
    for (size_t i = 0; i < n; ++i)
      if (succ[i].empty()) sinks->push_back(item_of[i]);
  return CUDA_SUCCESS;
}

// The body a conditional node runs at launch. Its condition is set by device code
// (cudaGraphSetConditional), which does not execute on the sim backend: the value is the
// handle's default (applied at each launch with CU_GRAPH_COND_ASSIGN_DEFAULT, else 0). A WHILE
// body runs once for a non-zero value: nothing could ever set it to zero.
CUgraph GraphManager::conditional_body(const GraphNode& node) const {
  const unsigned v = node.cond_value;
  if (node.bodies.empty()) return nullptr;
  switch (node.cond_type) {
    case CU_GRAPH_COND_TYPE_IF:
      return v != 0 ? node.bodies[0] : node.bodies.size() > 1 ? node.bodies[1] : nullptr;
    case CU_GRAPH_COND_TYPE_WHILE:
      if (v != 0)
        log::once(log::Level::warn, "conditional-while",
                  "a WHILE graph node's body runs once on the sim backend (its condition is set by device code)");
      return v != 0 ? node.bodies[0] : nullptr;
    case CU_GRAPH_COND_TYPE_SWITCH:
      return v < node.bodies.size() ? node.bodies[v] : nullptr;
  }
  return nullptr;
}

CUresult GraphManager::instantiate(CUgraph graph, CUgraphExec* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  auto exec = std::make_shared<GraphExec>();
  if (CUresult r = append_items(*g, {}, *exec, nullptr, 0); r != CUDA_SUCCESS) return r;
  {
    std::lock_guard lock(g->mu);
    exec->user_objects = user_objects_.retain_all(g->user_objects);
  }
  exec->handle = mint_handle<CUgraphExec>(HandleKind::graph_exec);
  execs_.add(exec->handle, exec);
  *out = exec->handle;
  return CUDA_SUCCESS;
}

CUresult GraphManager::conditional_handle(CUgraph graph, unsigned int default_value, unsigned int flags,
                                          CUgraphConditionalHandle* out) {
  if (out == nullptr || (flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto g = graphs_.find(graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  const auto h = reinterpret_cast<CUgraphConditionalHandle>(mint_handle<void*>(HandleKind::other));
  std::lock_guard lock(g->mu);
  g->conditionals[h] = (flags & CU_GRAPH_COND_ASSIGN_DEFAULT) ? default_value : 0u;
  *out = h;
  return CUDA_SUCCESS;
}

CUresult GraphManager::add_conditional(CUgraph graph, const CUgraphNode* deps, size_t num_deps,
                                       CUDA_CONDITIONAL_NODE_PARAMS& p, CUgraphNode* out) {
  auto g = graphs_.find(graph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  unsigned value = 0;
  {
    std::lock_guard lock(g->mu);
    auto it = g->conditionals.find(p.handle);
    if (it == g->conditionals.end()) {
      log::warn("cuGraphAddNode: the conditional handle was not made for this graph");
      return CUDA_ERROR_INVALID_VALUE;
    }
    value = it->second;
  }
  const bool size_ok = p.type == CU_GRAPH_COND_TYPE_IF     ? (p.size == 1 || p.size == 2)
                       : p.type == CU_GRAPH_COND_TYPE_WHILE ? p.size == 1
                       : p.type == CU_GRAPH_COND_TYPE_SWITCH ? p.size >= 1
                                                             : false;
  if (!size_ok) return CUDA_ERROR_INVALID_VALUE;
  Work w;
  w.kind = Work::Kind::other;
  w.label = "conditional";
  CUgraphNode node = nullptr;
  if (CUresult r = add_node(graph, CU_GRAPH_NODE_TYPE_CONDITIONAL, std::move(w), nullptr, deps, num_deps, &node);
      r != CUDA_SUCCESS)
    return r;
  auto n = nodes_.find(node);
  n->cond_type = p.type;
  n->cond_value = value;
  for (unsigned i = 0; i < p.size; ++i) {
    CUgraph body = nullptr;
    if (CUresult r = create(&body); r != CUDA_SUCCESS) return r;
    n->bodies.push_back(body);
  }
  p.phGraph_out = n->bodies.data();
  *out = node;
  return CUDA_SUCCESS;
}

CUresult GraphManager::destroy_exec(CUgraphExec exec) {
  const std::shared_ptr<GraphExec> e = execs_.remove(exec);
  if (!e) {
    log::warn("cuGraphExecDestroy: {} is not a live executable graph", static_cast<const void*>(exec));
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(e->mu);
  user_objects_.release_all(e->user_objects);
  return CUDA_SUCCESS;
}

CUresult GraphManager::retain_user_object(CUgraph graph, CUuserObject object, unsigned count, unsigned flags) {
  const std::shared_ptr<Graph> g = graphs_.find(graph);
  if (!g || (flags & ~static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)) != 0) {
    log::warn("cuGraphRetainUserObject: {} is not a live graph, or flags {:#x} are not 0 or CU_GRAPH_USER_OBJECT_MOVE",
              static_cast<const void*>(graph), flags);
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(g->mu);
  return user_objects_.own(g->user_objects, object, count, (flags & CU_GRAPH_USER_OBJECT_MOVE) != 0);
}

CUresult GraphManager::release_user_object(CUgraph graph, CUuserObject object, unsigned count) {
  const std::shared_ptr<Graph> g = graphs_.find(graph);
  if (!g) {
    log::warn("cuGraphReleaseUserObject: {} is not a live graph", static_cast<const void*>(graph));
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(g->mu);
  return user_objects_.disown(g->user_objects, object, count);
}

CUresult GraphManager::launch(CUgraphExec exec, CUstream stream, bool per_thread) {
  auto e = execs_.find(exec);
  if (!e) {
    log::warn("cuGraphLaunch: {} is not a live executable graph", static_cast<const void*>(exec));
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<LaunchItem> items;
  {
    std::lock_guard lock(e->mu);
    items = e->items;  // each launch runs its own copy of the work
  }
  return driver_.streams().submit_items(stream, std::move(items), per_thread);
}

}  // namespace vgpu
