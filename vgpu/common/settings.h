// Every VGPU_* environment variable, declared once: its name, type, default, one-line meaning
// and which component reads it (kSpecs below). Code reads a setting through the typed accessors
// (settings::integer(Id::measure_samples), ...), never through getenv, so that every variable is
// parsed by one parser with one rule for a malformed value: ONE log line naming the variable,
// the value and what is accepted (printed unless VGPU_LOG_LEVEL=off), then the default is used.
// A driver lives inside other people's processes: a typo in a variable must never crash them.
//
// Reading: a `once` setting is parsed on its first use and cached (thread-safe; hot paths may
// call the accessor freely). An `each_use` setting is parsed again at every call, because its
// readers deliberately see changes made while the process runs (a test switching VGPU_JOB_ID
// between two jobs in one process, the daemon client resolving its directory per connection);
// none of them is on a hot path. reread_for_testing() forgets the cached values.
//
// The README's table of settings is generated from kSpecs (vgpu-settings --markdown) and checked
// by the `settings` test suite, as is "every VGPU_* name used in the tree is declared here".
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vgpu::settings {

enum class Type {
  flag,      // 1/0, true/false, yes/no, on/off (any case)
  integer,   // a whole decimal number in [min, max]
  real,      // a decimal number in [min, max]
  text,      // any text
  path,      // a file or folder name
  choice,    // one of `choices` ("a|b|c", any case; the accessor gives the lower-case word)
  int_list,  // comma-separated integers, each in [min, max]
};

enum class Reading { once, each_use };

// One per variable, in kSpecs order (checked at compile time below).
enum class Id : int {
  log_level,
  trace,
  query_trace,
  config,
  nodes,
  gpus_per_node,
  device_count,
  gpu_model,
  memory,
  job_id,
  status_keep,
  timeline,
  kernel_db,
  kernel_db_misses,
  sim_nccl_data_bytes,
  sim_copy_data_bytes,
  sim_memory_report,
  clock_report,
  host_samples,
  clock_trace,
  real_libcuda,
  physical_devices,
  launch_policy,
  driver_time,
  cpu_clock,
  measure_samples,
  measure,
  launch_stats,
  memory_policy,
  shared_min_bytes,
  shared_chunk,
  cupti_library,
  simcore,
  global_rank_gpu,
  node_index,
  nccl_direct,
  nccl_ring_bytes,
  nccl_gate,
  shared_gpu_blocking,
  lazy_contexts,
  horizon,
  compute_beside_collective,
  compute_beside_waiting_collective,
  daemon_dir,
  daemon_tcp,
  daemon_token,
  daemon_token_file,
  daemon_timeout_s,
  daemon_idle_s,
  daemon_timeline,
  vgpud,
  test_sanitizers,
  tsan_gate,
  fuzz_rounds,
  fuzz_seed,
  count
};

struct Spec {
  Id id;
  std::string_view name;
  Type type;
  std::string_view default_value;  // as the user would write it; "" = unset
  std::string_view meaning;        // one line, for the README table
  std::string_view readers;        // the components that read it
  double min = 0, max = 0;         // integer, real, int_list: the accepted range
  std::string_view choices = {};   // choice: "a|b|c"
  Reading reading = Reading::once;
  // What a malformed value gives when that is not the default (VGPU_LOG_LEVEL: a user who set
  // an unreadable level wants to hear something, so "warn").
  std::string_view if_malformed = {};
  // Parsed by its reader with stricter rules than "log and use the default" (the cluster
  // shape: a wrong-sized cluster is worse than a refused one); read with raw().
  bool own_parser = false;
};

constexpr double kGiB = 1024.0 * 1024 * 1024;

inline constexpr Spec kSpecs[] = {
    {Id::log_level, "VGPU_LOG_LEVEL", Type::choice, "off",
     "log lines on stderr from this level up (`warning` = `warn`; unreadable: `warn`)", "all", 0, 0,
     "trace|debug|info|warn|warning|error|off", Reading::once, "warn"},
    {Id::trace, "VGPU_TRACE", Type::flag, "0",
     "log every private-table lookup and private call with its arguments", "sim driver, passthrough"},
    {Id::query_trace, "VGPU_QUERY_TRACE", Type::path, "",
     "append one line per query-type driver call (device and function attributes, occupancy, clusters, "
     "memory info, module loads) with the answer to this file", "sim driver, passthrough"},
    {Id::config, "VGPU_CONFIG", Type::path, "", "the cluster TOML file (unset: the embedded default)",
     "cluster config (drivers, plugin, vgpu-run)", 0, 0, {}, Reading::each_use, {}, true},
    {Id::nodes, "VGPU_NODES", Type::integer, "", "nodes in the cluster (overrides the file)",
     "cluster config", 1, 65536, {}, Reading::each_use, {}, true},
    {Id::gpus_per_node, "VGPU_GPUS_PER_NODE", Type::integer, "", "GPUs per node (overrides the file)",
     "cluster config", 1, 64, {}, Reading::each_use, {}, true},
    {Id::device_count, "VGPU_DEVICE_COUNT", Type::integer, "",
     "total GPUs, split over nodes as VGPU_NODES / VGPU_GPUS_PER_NODE allow", "cluster config", 1, 131072, {},
     Reading::each_use, {}, true},
    {Id::gpu_model, "VGPU_GPU_MODEL", Type::text, "",
     "GPU model, catalog id or alias: `H100-SXM-80GB`, `H200-141GB`, `A100-SXM-80GB`, `B200`", "cluster config", 0,
     0, {}, Reading::each_use, {}, true},
    {Id::memory, "VGPU_MEMORY", Type::text, "", "capacity per GPU, e.g. `80GiB` (default: the model's)",
     "cluster config", 0, 0, {}, Reading::each_use, {}, true},
    {Id::job_id, "VGPU_JOB_ID", Type::text, "",
     "the job's processes share one status region, daemon and NCCL segments (unset: `sid<session id>`)",
     "drivers, NVML, vgpu-smi, plugin, vgpud", 0, 0, {}, Reading::each_use},
    {Id::status_keep, "VGPU_STATUS_KEEP", Type::flag, "0",
     "the job's last process leaves the status region for vgpu-run to read and remove", "drivers", 0, 0, {},
     Reading::each_use},
    {Id::timeline, "VGPU_TIMELINE", Type::path, "",
     "write every kernel, copy and transfer of the virtual timeline to this Chrome trace file at exit",
     "both drivers", 0, 0, {},
     Reading::each_use},
    {Id::kernel_db, "VGPU_KERNEL_DB", Type::path, "",
     "kernel-time database (file or folder): the sim driver reads durations, the passthrough records them",
     "sim driver, passthrough", 0, 0, {}, Reading::each_use},
    {Id::kernel_db_misses, "VGPU_KERNEL_DB_MISSES", Type::path, "",
     "the sim driver lists here the launch signatures VGPU_KERNEL_DB lacked", "sim driver", 0, 0, {},
     Reading::each_use},
    {Id::sim_nccl_data_bytes, "VGPU_SIM_NCCL_DATA_BYTES", Type::integer, "4194304",
     "largest contribution of one rank to one NCCL collective whose data the sim backend moves "
     "(larger ones are timed only; `0`: no data moves)",
     "sim driver", 0, kGiB},
    {Id::sim_copy_data_bytes, "VGPU_SIM_COPY_DATA_BYTES", Type::integer, "",
     "largest copy or memset into device memory whose bytes the sim backend writes (larger ones are "
     "timed only and leave the destination as it was, so its host memory is never touched; a memset "
     "of 0 is always done: it costs no host memory; unset: every one)",
     "sim driver", 0, 1099511627776.0},
    {Id::sim_memory_report, "VGPU_SIM_MEMORY_REPORT", Type::path, "",
     "at exit the sim driver appends one JSON line of the process's host memory and its own share "
     "(module tables, device memory touched, what wrote it by path) to this file (`%p` = the process id)",
     "sim driver", 0, 0, {}, Reading::each_use},
    {Id::clock_report, "VGPU_CLOCK_REPORT", Type::path, "",
     "at exit each process appends one JSON line per host thread that kept virtual time: where its "
     "virtual clock's time came from (CPU time, the driver's own work, synchronizations, polling, "
     "raises to a device's horizon, hand-overs from other threads) to this file (`%p` = the process id); "
     "where the program marks ranges (cudaProfilerStart/Stop), only what happened inside them",
     "both drivers", 0, 0, {}, Reading::each_use},
    {Id::host_samples, "VGPU_HOST_SAMPLES", Type::path, "",
     "a debugging aid: sample the process's host threads on a 1 kHz CPU-time timer (SIGPROF) and at exit "
     "append one JSON line per process to this file (`%p` = the process id): per thread, the libraries on its "
     "stacks and its most frequent stacks; where the program marks ranges (cudaProfilerStart/Stop), only "
     "inside them. Not for programs that use SIGPROF themselves",
     "both drivers", 0, 0, {}, Reading::each_use},
    {Id::clock_trace, "VGPU_CLOCK_TRACE", Type::path, "",
     "a debugging aid: each host thread that keeps virtual time records its clock's last 131072 moves (each "
     "call's CPU time charged, jumps to work it waited for, the calling library and offset) and at exit the "
     "process appends one JSON line per thread to this file (`%p` = the process id)",
     "both drivers", 0, 0, {}, Reading::each_use},
    {Id::real_libcuda, "VGPU_REAL_LIBCUDA", Type::path, "",
     "the real driver (unset: versioned libcuda beside ours, then the usual system paths)", "passthrough"},
    {Id::physical_devices, "VGPU_PHYSICAL_DEVICES", Type::int_list, "",
     "physical GPUs to use, e.g. `0,1`: virtual GPU v runs on the (v mod n)-th (unset: all)", "passthrough", 0,
     1023},
    {Id::launch_policy, "VGPU_LAUNCH_POLICY", Type::choice, "all",
     "which launches run on the GPU: every one, the first of each signature, or none", "passthrough", 0, 0,
     "all|first|none"},
    {Id::driver_time, "VGPU_DRIVER_TIME", Type::choice, "none",
     "what a launch, async copy or event record adds to the calling thread's virtual clock besides its "
     "CPU time: nothing, the real driver's measured cost of that call (`table`: "
     "vgpu/timing/driver_call_cost.h), or `auto`: the table on the sim backend only (the default until "
     "2026-11-26, when DDP on the sim read +59% against the real step with it, +4.1% without)",
     "both", 0, 0, "auto|table|none"},
    {Id::cpu_clock, "VGPU_CPU_CLOCK", Type::choice, "estimated",
     "how a thread's CPU time between driver calls is read: `estimated` (short stretches charged their wall "
     "time, the CPU clock read about once a millisecond and around long calls: timing/outside_cpu_time.h) "
     "or `exact` (the CPU clock read on entry to and exit from every call: a system call each, for checking "
     "the estimate)",
     "both", 0, 0, "estimated|exact"},
    {Id::measure_samples, "VGPU_MEASURE_SAMPLES", Type::integer, "3",
     "launches measured per launch signature before its duration settles (one fewer when its two smallest agree within 5% or 0.5 us, more while they disagree)", "passthrough", 1, 1000},
    {Id::measure, "VGPU_MEASURE", Type::choice, "alone",
     "kernel measurement: one at a time across the job, concurrently, CUPTI for every launch, or CUPTI "
     "serialized",
     "passthrough", 0, 0, "alone|concurrent|cupti|serialize"},
    {Id::launch_stats, "VGPU_LAUNCH_STATS", Type::path, "",
     "file of launch counts, exact after each synchronization (`%p` = the process id)", "passthrough", 0, 0, {},
     Reading::each_use},
    {Id::memory_policy, "VGPU_MEMORY_POLICY", Type::choice, "private",
     "`shared`: large allocations of every virtual GPU share a few physical chunks", "passthrough", 0, 0,
     "private|shared"},
    {Id::shared_min_bytes, "VGPU_SHARED_MIN_BYTES", Type::integer, "4194304",
     "smallest allocation that VGPU_MEMORY_POLICY=shared maps onto shared chunks", "passthrough", 0,
     1099511627776.0},
    {Id::shared_chunk, "VGPU_SHARED_CHUNK", Type::integer, "1073741824",
     "largest shared chunk in bytes (chunks are powers of two from 2 MiB up to it)", "passthrough", 0,
     1099511627776.0},
    {Id::cupti_library, "VGPU_CUPTI_LIBRARY", Type::path, "",
     "libcupti to load (unset: the toolkit, then the nvidia Python wheels)", "passthrough (CUPTI)", 0, 0, {},
     Reading::each_use},
    {Id::simcore, "VGPU_SIMCORE", Type::choice, "local",
     "the NCCL plugin's network engine: in each process, the job's shared vgpud, or none", "NCCL plugin", 0, 0,
     "local|daemon|off"},
    {Id::global_rank_gpu, "VGPU_GLOBAL_RANK_GPU", Type::integer, "",
     "the rank's global GPU (unset: VGPU_NODE_INDEX x GPUs per node + the current device)",
     "NCCL plugin, passthrough", 0, 131071},
    {Id::node_index, "VGPU_NODE_INDEX", Type::integer, "0", "the node this process runs on",
     "NCCL plugin, passthrough", 0, 65535},
    {Id::nccl_direct, "VGPU_NCCL_DIRECT", Type::flag, "1",
     "`0`: ranks in one process also copy through the shared-memory ring", "NCCL plugin"},
    {Id::nccl_ring_bytes, "VGPU_NCCL_RING_BYTES", Type::integer, "1048576",
     "bytes of each shared-memory ring between two processes", "NCCL plugin", 4096, kGiB},
    {Id::nccl_gate, "VGPU_NCCL_GATE", Type::flag, "0",
     "experimental, no measured gain (2026-11-26): an NCCL collective's kernel waits on the GPU, before "
     "it starts, until every rank of its communicator has launched it (communicators a process holds "
     "several ranks of are left alone; one stalled past 5 s is let go with one line)",
     "passthrough"},
    {Id::shared_gpu_blocking, "VGPU_SHARED_GPU_BLOCKING", Type::flag, "1",
     "real contexts of virtual GPUs that share a physical one wait blocking instead of spinning (unless "
     "the program chose a scheduling mode), so that synchronizing ranks do not each spin a core while all "
     "ranks' work runs (8 ranks of DDP on one H200: 1.8 s of CPU a step less per rank, 2026-11-26)",
     "passthrough"},
    {Id::lazy_contexts, "VGPU_LAZY_CONTEXTS", Type::flag, "1",
     "a virtual GPU's real context is made when the program first uses it, not when the runtime asks for "
     "every device's primary context at start-up: each process holds one real context per virtual GPU it "
     "uses, not one per virtual GPU (an 8-rank DDP job on one H200: 8 real contexts instead of 72, so an "
     "MPS server admits it, 2026-11-27). 0: every primary context real at start-up, as before",
     "passthrough"},
    {Id::horizon, "VGPU_HORIZON", Type::choice, "all",
     "which threads' synchronizations raise a device's horizon, the virtual time every thread of the "
     "process that then submits to the device starts from: `all`, or only `submitters` (threads that "
     "issued work to some device themselves; bystanders such as watchdogs do not). Experimental: "
     "`submitters` brought nothing on 8 ranks of DDP and read DDP on 2 ranks 9.9% fast (2026-11-26)",
     "passthrough", 0, 0, "all|submitters"},
    {Id::compute_beside_collective, "VGPU_COMPUTE_BESIDE_COLLECTIVE", Type::real, "0.5",
     "the rate at which a GPU's other kernels progress while a collective's (NCCL's) kernel there moves "
     "data, against their rate alone (DDP steps of GPT-2 on 2 H200s measured 0.49-0.54, 2026-11-28; "
     "timing/collective_overlap.h); `1`: no slowdown",
     "both", 0, 1},
    {Id::compute_beside_waiting_collective, "VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE", Type::real, "0.75",
     "the same while the collective's kernel waits for its peers (it holds its SMs: 0.68-0.76 measured, "
     "2026-11-28); `1`: no slowdown",
     "both", 0, 1},
    {Id::daemon_dir, "VGPU_DAEMON_DIR", Type::path, "",
     "vgpud's socket folder (unset: `$XDG_RUNTIME_DIR/vgpu`, else `/tmp/vgpu-<uid>`)", "vgpud and its clients", 0,
     0, {}, Reading::each_use},
    {Id::daemon_tcp, "VGPU_DAEMON_TCP", Type::text, "",
     "`host:port` of a vgpud on another host (TCP instead of the local socket)", "vgpud clients", 0, 0, {},
     Reading::each_use},
    {Id::daemon_token, "VGPU_DAEMON_TOKEN", Type::text, "", "the job's shared secret for vgpud over TCP",
     "vgpud and its clients", 0, 0, {}, Reading::each_use},
    {Id::daemon_token_file, "VGPU_DAEMON_TOKEN_FILE", Type::path, "",
     "a file holding the token, when VGPU_DAEMON_TOKEN is unset", "vgpud and its clients", 0, 0, {},
     Reading::each_use},
    {Id::daemon_timeout_s, "VGPU_DAEMON_TIMEOUT_S", Type::real, "120",
     "seconds a call to vgpud may take (0: no limit)", "vgpud clients", 0, 1e9, {}, Reading::each_use},
    {Id::daemon_idle_s, "VGPU_DAEMON_IDLE_S", Type::real, "30",
     "seconds a vgpud without clients waits before it exits", "vgpud and its clients", 0, 1e9, {},
     Reading::each_use},
    {Id::daemon_timeline, "VGPU_DAEMON_TIMELINE", Type::flag, "0",
     "`1`: vgpud keeps every event for its timeline after reclaiming it (its memory then grows with the job); "
     "`0`: its timeline shows the events not yet reclaimed", "vgpud"},
    {Id::vgpud, "VGPU_VGPUD", Type::path, "",
     "the vgpud binary to start (unset: beside the library, then `PATH`)", "vgpud clients", 0, 0, {},
     Reading::each_use},
    {Id::test_sanitizers, "VGPU_TEST_SANITIZERS", Type::flag, "1",
     "`0`: `tests/run-all` runs only the plain build", "tests/run-all (shell)"},
    {Id::tsan_gate, "VGPU_TSAN_GATE", Type::flag, "1",
     "`0`: `tests/run-all` reports ThreadSanitizer findings without failing", "tests/run-all (shell)"},
    {Id::fuzz_rounds, "VGPU_FUZZ_ROUNDS", Type::integer, "",
     "rounds of the fuzz tests (unset: each test's own default)", "fuzz tests", 1, 1e9},
    {Id::fuzz_seed, "VGPU_FUZZ_SEED", Type::integer, "", "seed of the fuzz tests (unset: a fixed one)",
     "fuzz tests", 0, 1e15},
};

static_assert(std::size(kSpecs) == static_cast<size_t>(Id::count), "one Spec per Id");
consteval bool specs_in_id_order() {
  for (size_t i = 0; i < std::size(kSpecs); ++i)
    if (static_cast<size_t>(kSpecs[i].id) != i) return false;
  return true;
}
static_assert(specs_in_id_order(), "kSpecs must list the settings in Id order");

constexpr const Spec& spec(Id id) { return kSpecs[static_cast<size_t>(id)]; }
// The declared setting called `name`, or nullptr.
const Spec* find(std::string_view name);

// Typed accessors. Each checks that `id` has the type asked for (a mismatch is a bug in vgpu:
// one error line, and the type's zero value).
bool flag(Id id);
int64_t integer(Id id);
double real(Id id);
std::string text(Id id);  // text, path, choice
std::vector<int64_t> int_list(Id id);
// Whether the variable is set to a valid, non-empty value (VGPU_GLOBAL_RANK_GPU: given, or not).
bool is_set(Id id);

// The variable's text as the environment holds it now (nullptr when unset or empty), for a
// reader with its own stricter parser (Spec::own_parser: the cluster configuration).
const char* raw(Id id);

// A `once` text or choice setting read without reporting a malformed value, for log.cpp's
// VGPU_LOG_LEVEL: the report itself is a log line (log.cpp -> settings -> log.cpp). The report
// comes with the next access of any other setting. nullopt when unset; an unreadable
// VGPU_LOG_LEVEL reads as "warn".
std::optional<std::string> text_quietly(Id id);

// Forgets every cached value and reported complaint; the next access reads the environment again.
void reread_for_testing();

std::string_view type_name(Type type);  // "integer", "integer list", ...
// What a value of `spec` must look like, in words ("an integer from 1 to 1000").
std::string accepted(const Spec& spec);

// One parsed value; `complaint` is the log line for a malformed one (the value is then the
// default's). Exposed for the tests and vgpu-settings.
struct Parsed {
  bool set = false;
  bool flag = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;
  std::vector<int64_t> list;
  std::string complaint;
};
Parsed parse(const Spec& spec, const char* value);

}  // namespace vgpu::settings
