#include "tools/smi_options.h"

#include <cstdlib>
#include <sstream>

namespace vgpu::smi {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    const size_t b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    out.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
  }
  return out;
}

bool parse_int(const std::string& s, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtol(s.c_str(), &end, 10);
  return *end == '\0';
}

}  // namespace

const char* usage_text() {
  return "vgpu-smi: nvidia-smi for vgpu's virtual GPUs.\n"
         "\n"
         "    vgpu-smi [OPTION...]\n"
         "\n"
         "    -h, --help               This help.\n"
         "    -L, --list-gpus          One line per GPU: index, name, UUID.\n"
         "    -i, --id=N[,M...]        Only these GPUs (by index).\n"
         "    --query-gpu=FIELD,...    Any field of nvidia-smi --help-query-gpu (see\n"
         "                             --help-query-gpu), and vgpu's own: vgpu.clock, vgpu.busy,\n"
         "                             vgpu.kernels, vgpu.utilization, vgpu.memory.physical,\n"
         "                             vgpu.memory.capacity.\n"
         "    --help-query-gpu         The fields --query-gpu knows.\n"
         "    --query-compute-apps=FIELD,...  One row per process and GPU: pid, process_name,\n"
         "                             used_memory (used_gpu_memory), gpu_uuid, gpu_bus_id,\n"
         "                             gpu_name, gpu_serial, timestamp (with --format=csv).\n"
         "    -q, --query              The full report of every (or each -i) GPU.\n"
         "    topo -m                  The virtual fabric as a matrix: NV# (NVLinks), NODE, SYS.\n"
         "    nvlink -s                Each GPU's NVLinks and their speed.\n"
         "    dmon [-c N] [-d SEC]     One line per GPU and sample: power, temperatures,\n"
         "                             utilization, clocks.\n"
         "    --format=csv[,noheader][,nounits]  Output format of --query-gpu (required with it).\n"
         "    -l, --loop[=SEC]         Print again every SEC seconds (default 5) until interrupted.\n"
         "    --vgpu                   Only what vgpu knows: job, backend, policies, virtual clock,\n"
         "                             and each device's memory used and the physical memory\n"
         "                             behind it.\n"
         "    --job=ID                 The job to show (default: this session's job, else the only\n"
         "                             job of this user, else the configured cluster).\n"
         "    --uid=N                  Look for --job among the jobs of user N.\n"
         "    --cluster                The configured cluster with nothing running, whatever jobs\n"
         "                             there are.\n";
}

std::optional<std::string> parse_options(int argc, char** argv, Options* out) {
  Options o;
  // nvidia-smi's subcommands come first; vgpu's own options (--cluster, --job) may precede them.
  int skip = 0;
  for (int i = 1; i < argc && skip == 0; ++i) {
    const std::string a = argv[i];
    if (a == "topo" || a == "nvlink" || a == "dmon") o.subcommand = a, skip = i;
    else if (a == "--job" || a == "--uid") ++i;  // and its value
    else if (a != "--cluster" && a.rfind("--job=", 0) != 0 && a.rfind("--uid=", 0) != 0) break;
  }
  bool topo_matrix = false, nvlink_status = false;
  for (int i = 1; i < argc; ++i) {
    if (i == skip) continue;
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (arg.rfind("--", 0) == 0) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_value = true;
      }
    } else if (arg.size() > 2 && arg[0] == '-' && arg[2] == '=') {  // nvidia-smi accepts -i=0
      value = arg.substr(3);
      arg = arg.substr(0, 2);
      has_value = true;
    }
    // Takes the option's value from "=value" or the next argument.
    auto need = [&](const char* what) -> std::optional<std::string> {
      if (has_value) return std::nullopt;
      if (i + 1 >= argc) return std::string("Option ") + arg + " requires " + what + ".";
      value = argv[++i];
      has_value = true;
      return std::nullopt;
    };
    if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "--help-query-gpu") {
      o.help_query_gpu = true;
    } else if (arg == "-L" || arg == "--list-gpus") {
      o.list = true;
    } else if (arg == "-i" || arg == "--id") {
      if (auto e = need("a GPU index")) return e;
      for (const std::string& s : split(value, ',')) {
        long n = 0;
        if (!parse_int(s, &n) || n < 0) return "Invalid GPU index \"" + s + "\" for " + arg + ".";
        o.ids.push_back(static_cast<int>(n));
      }
    } else if (arg == "--query-gpu") {
      if (auto e = need("a list of fields")) return e;
      o.query_gpu = split(value, ',');
      if (o.query_gpu.empty()) return std::string("--query-gpu needs at least one field.");
    } else if (arg == "--format") {
      if (auto e = need("a format")) return e;
      for (const std::string& f : split(value, ',')) {
        if (f == "csv") o.csv = true;
        else if (f == "noheader") o.noheader = true;
        else if (f == "nounits") o.nounits = true;
        else return "Invalid format \"" + f + "\": use csv[,noheader][,nounits].";
      }
      if (!o.csv) return std::string("--format must include csv.");
    } else if (arg == "-l" || arg == "--loop") {
      double seconds = 5;
      if (!has_value && i + 1 < argc && argv[i + 1][0] != '-') value = argv[++i], has_value = true;
      if (has_value) {
        char* end = nullptr;
        seconds = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !(seconds > 0)) return "Invalid loop interval \"" + value + "\".";
      }
      o.loop_s = seconds;
    } else if ((arg == "-m" || arg == "--matrix") && o.subcommand == "topo") {
      topo_matrix = true;
    } else if ((arg == "-s" || arg == "--status") && o.subcommand == "nvlink") {
      nvlink_status = true;
    } else if ((arg == "-c" || arg == "--count") && o.subcommand == "dmon") {
      if (auto e = need("a sample count")) return e;
      long n = 0;
      if (!parse_int(value, &n) || n <= 0) return "Invalid count \"" + value + "\".";
      o.dmon_count = static_cast<int>(n);
    } else if ((arg == "-d" || arg == "--delay") && o.subcommand == "dmon") {
      if (auto e = need("a delay")) return e;
      long n = 0;
      if (!parse_int(value, &n) || n <= 0) return "Invalid delay \"" + value + "\".";
      o.dmon_delay_s = static_cast<double>(n);
    } else if (arg == "-q" || arg == "--query") {
      o.full_report = true;
    } else if (arg == "--query-compute-apps") {
      if (auto e = need("a list of fields")) return e;
      o.query_apps = split(value, ',');
      if (o.query_apps.empty()) return std::string("--query-compute-apps needs at least one field.");
    } else if (arg == "--cluster") {
      o.cluster = true;
    } else if (arg == "--vgpu") {
      o.vgpu_only = true;
    } else if (arg == "--job") {
      if (auto e = need("a job id")) return e;
      if (value.empty()) return std::string("--job needs a job id.");
      o.job = value;
    } else if (arg == "--uid") {
      if (auto e = need("a user id")) return e;
      long n = 0;
      if (!parse_int(value, &n) || n < 0) return "Invalid user id \"" + value + "\".";
      o.uid = static_cast<uid_t>(n);
    } else {
      return "Invalid combination of input arguments. Unknown option \"" + std::string(argv[i]) + "\".";
    }
  }
  const bool query = !o.query_gpu.empty() || !o.query_apps.empty();
  if (query && !o.csv) return std::string("Option --format=csv must be specified with --query-gpu.");
  if (!query && o.csv) return std::string("Option --format is only valid with --query-gpu.");
  if (o.subcommand == "topo" && !topo_matrix) return std::string("topo: use -m (--matrix) to show the topology.");
  if (o.subcommand == "nvlink" && !nvlink_status) return std::string("nvlink: use -s (--status) to show the links.");
  if (o.uid && !o.job) return std::string("Option --uid needs --job.");
  if (o.cluster && o.job) return std::string("Options --cluster and --job exclude each other.");
  *out = std::move(o);
  return std::nullopt;
}

}  // namespace vgpu::smi
