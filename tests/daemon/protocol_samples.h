// One or more sample frames of every message type, with edge values, for the round-trip tests
// and as seeds of the fuzz loops.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "protocol.h"

namespace simcore::testing {

inline std::vector<wire::Frame> sample_frames() {
  using namespace wire;
  const double inf = std::numeric_limits<double>::infinity();
  FlowSpec flow;
  flow.src_gpu = 3;
  flow.dst_gpu = -1;
  flow.bytes = ~0ull;
  flow.not_before = 1.5e-6;
  flow.after = {1, 2, ~0ull};
  flow.label = "allreduce ring step 3";
  FlowSpec empty_flow;
  TaskSpec task;
  task.gpu = 7;
  task.lane = 12;
  task.duration = 2.5e-3;
  task.not_before = -0.0;
  task.after = {42};
  task.label = std::string(1000, 'k') + "_Z9my_kernelPfS_i";
  task.carried = 1.25e-3;
  std::string binary_label("a\0b\xff", 4);
  FlowSpec odd_flow = flow;
  odd_flow.label = binary_label;
  odd_flow.after.assign(500, 9);
  Engine::Stats stats;
  stats.events_submitted = 1;
  stats.events_live = 2;
  stats.flow_segments = 3;
  stats.history_bytes = 4;
  stats.result_bytes = 5;
  stats.timeline_bytes = 6;
  stats.rollbacks = 7;
  stats.replayed_events = 8;
  stats.solves = 9;
  stats.solved_flows = ~0ull;
  stats.stale_items_dropped = 15;
  stats.floor = 1.25;
  std::vector<Frame> f = {
      {1, Hello{"job-1", 0, ""}},
      {2, Hello{std::string(kMaxJobBytes, 'j'), -7, std::string(kMaxTokenBytes, 't')}},
      {3, AddFlow{flow}},
      {4, AddFlow{empty_flow}},
      {5, AddFlow{odd_flow}},
      {6, AddTask{task}},
      {7, AddTask{TaskSpec{}}},
      {8, Query{1}},
      {9, Query{~0ull}},
      {10, IsFinal{77}},
      {11, RegisterRank{0}},
      {12, RegisterRank{-2147483647 - 1}},
      {13, SetRankFloor{3, 12.25}},
      {14, SetRankFloor{3, inf}},
      {15, UnregisterRank{1023}},
      {16, WaitFinal{5}},
      {17, TimelineRequest{0, 0}},
      {18, TimelineRequest{~0ull, ~0u}},
      {19, Shutdown{}},
      {191, WaitFinalForRank{7, 3}},
      {192, WaitFinalForRank{~0ull, -1}},
      {193, StatsRequest{}},
      {194, StatsReply{stats}},
      {195, StatsReply{}},
      {20, HelloReply{"job-1", 12345}},
      {21, EventReply{0}},
      {22, EventReply{99}},
      {23, IntervalReply{}},
      {24, IntervalReply{Interval{1.0, 2.0}}},
      {25, IntervalReply{Interval{std::nan(""), inf}}},  // replies carry engine values as-is
      {26, BoolReply{true}},
      {27, BoolReply{false}},
      {28, Ack{}},
      {29, TimelineReply{10, 4, "abcdef"}},
      {30, TimelineReply{0, 0, ""}},
      {31, ErrorReply{ErrorCode::kWrongJob, "this daemon serves job 'a'"}},
      {~0ull, ErrorReply{static_cast<ErrorCode>(999), ""}},
      {32, AddFlows{{flow, empty_flow, odd_flow}}},
      {33, AddFlows{}},
      {34, EventsReply{{1, 0, ~0ull}}},
      {35, EventsReply{}},
      {36, ShareCollectives{(1 << 20) + 3, 0.25,
                            {SharedItem{0xfeedull, 0, 8, {3}, {flow, empty_flow}},
                             SharedItem{~0ull, ~0ull, kMaxShareRanks, {0, static_cast<int32_t>(kMaxShareRanks - 1)}, {}},
                             SharedItem{7, 1, 0, {}, {odd_flow}}}}},  // a message: waits for nobody
      {37, ShareCollectives{-1, std::nullopt, {}}},
      {40, ShareCollectives{(2 << 20) + 1, 1.5, {}, {1, 2, ~0ull}}},  // the NCCL plugin's: ids released only
      {38, SharedFinishes{4, {{2.5e-3, 2}, {std::nullopt, 0}, {inf, ~0u}}}},
      {39, SharedFinishes{}},
  };
  return f;
}

inline std::vector<uint8_t> encode(const wire::Frame& f) {
  std::vector<uint8_t> out;
  wire::append_frame(out, f);
  return out;
}

}  // namespace simcore::testing
