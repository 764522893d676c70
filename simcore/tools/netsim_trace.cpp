#include "netsim_trace.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace simcore::netsim {
namespace {

using nlohmann::json;

std::string describe(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

}  // namespace

bool TraceReader::fail(std::string message) {
  error_ = TraceError{line_, std::move(message)};
  return false;
}

bool TraceReader::next(std::istream& in, TraceLine& out) {
  std::string text;
  while (std::getline(in, text)) {
    ++line_;
    const size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;
    out = TraceLine{};
    out.line = line_;
    if (!parse(text, out)) return false;
    if (!ids_.emplace(out.id, count_).second) return fail("duplicate id \"" + out.id + "\"");
    ++count_;
    return true;
  }
  return false;
}

bool TraceReader::parse(const std::string& text, TraceLine& out) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const size_t cut = what.find("] ");
    return fail("bad JSON: " + (cut == std::string::npos ? what : what.substr(cut + 2)));
  }
  if (!j.is_object()) return fail("expected a JSON object, got " + describe(j));

  bool has_src = false, has_dst = false, has_bytes = false, has_gpu = false, has_duration = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "id") {
      if (v.is_string()) out.id = v.get<std::string>();
      else if (v.is_number_integer()) out.id = std::to_string(v.get<int64_t>());
      else return fail("\"id\" must be a string or an integer, got " + describe(v));
      if (out.id.empty()) return fail("\"id\" is empty");
    } else if (key == "src" || key == "dst" || key == "gpu") {
      if (!v.is_number_integer()) return fail("\"" + key + "\" must be a GPU number, got " + describe(v));
      const int64_t g = v.get<int64_t>();
      if (g < 0 || g >= gpus_)
        return fail("GPU " + std::to_string(g) + " in \"" + key + "\" is out of range: the cluster has " +
                    std::to_string(gpus_) + " GPUs (0.." + std::to_string(gpus_ - 1) + ")");
      if (key == "dst") out.dst = static_cast<int>(g), has_dst = true;
      else if (key == "src") out.src = static_cast<int>(g), has_src = true;
      else out.src = static_cast<int>(g), has_gpu = true;
    } else if (key == "bytes") {
      if (v.is_number_unsigned()) out.bytes = v.get<uint64_t>();
      else if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() < 1.8e19 &&
               std::floor(v.get<double>()) == v.get<double>())
        out.bytes = static_cast<uint64_t>(v.get<double>());
      else return fail("\"bytes\" must be a non-negative integer, got " + describe(v));
      has_bytes = true;
    } else if (key == "start_us" || key == "duration_us") {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        return fail("\"" + key + "\" must be a non-negative number, got " + describe(v));
      if (key == "start_us") out.start_us = v.get<double>();
      else out.duration_us = v.get<double>(), has_duration = true;
    } else if (key == "after") {
      if (!v.is_array()) return fail("\"after\" must be an array of ids, got " + describe(v));
      for (const json& a : v) {
        std::string dep;
        if (a.is_string()) dep = a.get<std::string>();
        else if (a.is_number_integer()) dep = std::to_string(a.get<int64_t>());
        else return fail("\"after\" must hold ids, got " + describe(a));
        const auto pos = ids_.find(dep);
        if (pos == ids_.end())
          return fail("\"after\" names \"" + dep + "\", which no earlier line defines");
        out.after.push_back(pos->second);
      }
    } else if (key == "label") {
      if (!v.is_string()) return fail("\"label\" must be a string, got " + describe(v));
      out.label = v.get<std::string>();
    } else {
      return fail("unknown key \"" + key +
                  "\" (expected id, src, dst, bytes, gpu, duration_us, start_us, after, label)");
    }
  }
  if (out.id.empty()) return fail("missing \"id\"");
  out.is_task = has_duration || has_gpu;
  if (out.is_task) {
    if (has_src || has_dst || has_bytes) return fail("a line is a flow (src, dst, bytes) or a task (gpu, duration_us), not both");
    if (!has_gpu) return fail("a task needs \"gpu\"");
    if (!has_duration) return fail("a task needs \"duration_us\"");
  } else {
    if (!has_src) return fail("missing \"src\"");
    if (!has_dst) return fail("missing \"dst\"");
    if (!has_bytes) return fail("missing \"bytes\"");
  }
  return true;
}

}  // namespace simcore::netsim
