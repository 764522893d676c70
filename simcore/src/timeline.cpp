#include "timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <string_view>

namespace simcore {

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

double us(double t) { return t * 1e6; }

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
    std::priority_queue<std::pair<double, int32_t>, std::vector<std::pair<double, int32_t>>,
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
      const double moving = e.transfer_end - e.start;
      out += fmt::format(R"(,"args":{{"dst":{},"bytes":{},"last_byte_us":{:.6f},"mean_GBps":{:.3f}}})",
                         e.dst, e.bytes, us(e.transfer_end),
                         moving > 0 ? static_cast<double>(e.bytes) / moving / 1e9 : 0.0);
    } else if (e.issue >= 0 || e.carried > 0) {
      // A task's args, each only when known: the passthrough knows both, the sim backend's
      // engine only what a kernel carried.
      out += ",\"args\":{";
      if (e.issue >= 0) out += fmt::format(R"("issued_us":{:.6f})", us(e.issue));
      if (e.carried > 0) out += fmt::format(R"({}"carried_us":{:.6f})", e.issue >= 0 ? "," : "", us(e.carried));
      out += "}";
    }
    out += "}";
  }
  out += "]}\n";
  return out;
}

bool merge_chrome_traces(const std::vector<std::string>& traces, std::string* out) {
  // chrome_trace_json writes one event per line: the events are the lines between the opening
  // of "traceEvents" and the closing "]}".
  static constexpr std::string_view kHead = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  std::vector<std::string_view> events;
  std::set<std::string_view> metadata;
  for (const std::string& t : traces) {
    std::string_view body(t);
    while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.remove_suffix(1);
    if (!body.starts_with(kHead) || !body.ends_with("]}")) return false;
    body = body.substr(kHead.size(), body.size() - kHead.size() - 2);
    while (!body.empty()) {
      const size_t eol = body.find('\n');
      std::string_view line = body.substr(0, eol);
      body = eol == std::string_view::npos ? std::string_view() : body.substr(eol + 1);
      if (line.ends_with(',')) line.remove_suffix(1);
      if (line.empty()) continue;
      // The same GPU's names may come from several processes (a GPU's lanes are per process).
      if (line.find("\"ph\":\"M\"") != std::string_view::npos && !metadata.insert(line).second) continue;
      events.push_back(line);
    }
  }
  std::string merged(kHead);
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) merged += ",\n";
    merged += events[i];
  }
  merged += "]}\n";
  *out = std::move(merged);
  return true;
}

}  // namespace simcore
