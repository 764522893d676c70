#include "timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>

namespace simcore::detail {

void append_json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

namespace {

constexpr int kNetLaneBase = 1000000;  // flow lanes sit after any task lane

double us(Time t) { return t * 1e6; }

}  // namespace

std::string chrome_trace_json(std::vector<TimelineEntry> entries) {
  // Flow lanes: per source GPU, by start time, the lowest lane free again at that start.
  std::stable_sort(entries.begin(), entries.end(), [](const TimelineEntry& a, const TimelineEntry& b) {
    return a.gpu != b.gpu ? a.gpu < b.gpu : a.start < b.start;
  });
  std::map<int32_t, std::set<int32_t>> task_lanes;  // per GPU
  std::map<int32_t, int32_t> net_lanes;             // per GPU: how many
  std::vector<int32_t> tid(entries.size());
  {
    int32_t gpu = -1;
    // (busy until, lane) of the current GPU's net lanes
    std::priority_queue<std::pair<Time, int32_t>, std::vector<std::pair<Time, int32_t>>,
                        std::greater<>> busy;
    std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> free_lanes;
    for (size_t i = 0; i < entries.size(); ++i) {
      const TimelineEntry& e = entries[i];
      if (e.gpu != gpu) {
        gpu = e.gpu;
        busy = {};
        free_lanes = {};
      }
      if (!e.flow) {
        tid[i] = e.lane;
        task_lanes[e.gpu].insert(e.lane);
        continue;
      }
      while (!busy.empty() && busy.top().first <= e.start) {
        free_lanes.push(busy.top().second);
        busy.pop();
      }
      int32_t lane;
      if (!free_lanes.empty()) {
        lane = free_lanes.top();
        free_lanes.pop();
      } else {
        lane = net_lanes[e.gpu]++;
      }
      busy.emplace(e.finish, lane);
      tid[i] = kNetLaneBase + lane;
    }
  }

  std::string out;
  out.reserve(entries.size() * 160 + 256);
  out += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  std::set<int32_t> gpus;
  for (const auto& e : entries) gpus.insert(e.gpu);
  for (int32_t g : gpus) {
    sep();
    out += fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"GPU {}"}}}})", g, g);
    sep();
    out += fmt::format(R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})", g, g);
    for (int32_t lane : task_lanes[g]) {
      sep();
      out += fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"lane {}"}}}})", g, lane, lane);
    }
    for (int32_t k = 0; k < net_lanes[g]; ++k) {
      sep();
      out += fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"net send {}"}}}})", g, kNetLaneBase + k, k);
    }
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const TimelineEntry& e = entries[i];
    sep();
    out += "{\"name\":";
    if (!e.label.empty()) append_json_string(out, e.label);
    else if (e.flow) out += fmt::format("\"flow {}->{}\"", e.gpu, e.dst);
    else out += "\"task\"";
    out += fmt::format(R"(,"cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f})",
                       e.flow ? "flow" : "task", e.gpu, tid[i], us(e.start),
                       us(e.finish - e.start));
    if (e.flow) {
      const Time moving = e.transfer_end - e.start;
      out += fmt::format(R"(,"args":{{"dst":{},"bytes":{},"last_byte_us":{:.6f},"mean_GBps":{:.3f}}})",
                         e.dst, e.bytes, us(e.transfer_end),
                         moving > 0 ? static_cast<double>(e.bytes) / moving / 1e9 : 0.0);
    }
    out += "}";
  }
  out += "]}\n";
  return out;
}

}  // namespace simcore::detail
