// vgpu-smi's command line, with nvidia-smi's spelling where nvidia-smi has the option.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace vgpu::smi {

struct Options {
  bool help = false;
  bool help_query_gpu = false;           // --help-query-gpu
  bool list = false;                     // -L, --list-gpus
  std::vector<int> ids;                  // -i, --id: empty = every device
  std::vector<std::string> query_gpu;    // --query-gpu=a,b,...
  std::vector<std::string> query_apps;   // --query-compute-apps=a,b,...
  bool full_report = false;              // -q, --query
  std::string subcommand;                // "topo" (-m), "nvlink" (-s), "dmon"
  std::optional<int> dmon_count;         // dmon -c N: samples (default: until interrupted)
  double dmon_delay_s = 1;               // dmon -d N
  bool csv = false, noheader = false, nounits = false;  // --format=csv[,noheader][,nounits]
  std::optional<double> loop_s;          // -l [SEC], --loop=SEC
  bool vgpu_only = false;                // --vgpu: only what vgpu knows (job, clocks, policies)
  std::optional<std::string> job;        // --job ID
  std::optional<uid_t> uid;              // --uid N: a job of another user (needs their permission)
  bool cluster = false;                  // --cluster: the configured cluster, whatever runs
};

// nullopt on success; else the message for the user (exit code 2).
std::optional<std::string> parse_options(int argc, char** argv, Options* out);

const char* usage_text();

}  // namespace vgpu::smi
