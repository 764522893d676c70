// vgpu-smi: nvidia-smi for the virtual GPUs of a vgpu job.
//
// Which job: --job ID (of this user, or of --uid N); by default the job of this session
// (VGPU_JOB_ID, else the session id: what the driver names its region after), else the only job
// of this user, else the configured cluster with nothing running.
// Exit codes as nvidia-smi's: 0 ok, 2 bad arguments, 4 no permission, 6 no such device or job.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "tools/smi_fields.h"
#include "tools/smi_options.h"
#include "tools/smi_render.h"

namespace {

using vgpu::inspect::JobView;

struct Selected {
  JobView view;
  std::string note;
};

// 0 and the view, or an exit code after printing why.
int select_job(const vgpu::smi::Options& o, Selected* out) {
  const uid_t uid = o.uid.value_or(getuid());
  std::string error;
  if (o.cluster) {
    if (vgpu::inspect::configured_view(&out->view, &error)) return 0;
    std::fprintf(stderr, "vgpu-smi: %s\n", error.c_str());
    return 1;
  }
  if (o.job) {
    if (vgpu::inspect::job_view(uid, *o.job, &out->view, &error)) return 0;
    const bool denied = error.find("Permission denied") != std::string::npos;
    std::fprintf(stderr, "vgpu-smi: cannot read job \"%s\" of user %u: %s\n", o.job->c_str(),
                 static_cast<unsigned>(uid), error.c_str());
    return denied ? 4 : 6;
  }
  if (vgpu::inspect::job_view(uid, vgpu::status::current_job_id(), &out->view, &error)) return 0;
  // A region that exists but cannot be used (garbage, another user's) is said, not passed over.
  if (error.rfind("no status region", 0) != 0) std::fprintf(stderr, "vgpu-smi: %s\n", error.c_str());
  const std::vector<std::string> jobs = vgpu::status::list_jobs(uid);
  if (jobs.size() == 1 && vgpu::inspect::job_view(uid, jobs[0], &out->view, &error)) return 0;
  if (jobs.size() > 1) {
    out->note = std::to_string(jobs.size()) + " jobs are running (";
    for (size_t i = 0; i < jobs.size(); ++i) out->note += (i ? ", " : "") + jobs[i];
    out->note += "): choose one with --job ID.";
  }
  if (vgpu::inspect::configured_view(&out->view, &error)) return 0;
  std::fprintf(stderr, "vgpu-smi: %s\n", error.c_str());
  return 1;
}

int print_once(const vgpu::smi::Options& o) {
  Selected sel;
  if (int rc = select_job(o, &sel); rc != 0) return rc;
  vgpu::smi::Shown shown{sel.view, {}, sel.note};
  if (o.ids.empty()) {
    for (size_t i = 0; i < sel.view.devices.size(); ++i) shown.devices.push_back(static_cast<int>(i));
  } else {
    for (int id : o.ids) {
      if (static_cast<size_t>(id) >= sel.view.devices.size()) {
        std::fprintf(stderr, "No devices were found\n");
        return 6;
      }
      shown.devices.push_back(id);
    }
  }
  std::string out;
  if (o.subcommand == "dmon") {
    // Samples until -c is reached or interrupted; the header again every 20 samples, as nvidia-smi.
    for (int n = 0; !o.dmon_count || n < *o.dmon_count; ++n) {
      if (n > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(o.dmon_delay_s));
        if (int rc = select_job(o, &sel); rc != 0) return rc;
      }
      const vgpu::smi::Shown now{sel.view, shown.devices, ""};
      std::string sample = (n % 20 == 0 ? vgpu::smi::render_dmon_header() : "") + vgpu::smi::render_dmon_rows(now);
      std::fwrite(sample.data(), 1, sample.size(), stdout);
      std::fflush(stdout);
    }
    return 0;
  }
  if (o.subcommand == "topo") {
    out = vgpu::smi::render_topology(shown);
  } else if (o.subcommand == "nvlink") {
    out = vgpu::smi::render_nvlink_status(shown);
  } else if (!o.query_apps.empty()) {
    std::string error;
    auto csv = vgpu::smi::render_compute_apps(shown, o.query_apps, o.noheader, o.nounits, &error);
    if (!csv) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 2;
    }
    out = *csv;
  } else if (o.full_report) {
    out = vgpu::smi::render_full_report(shown);
  } else if (!o.query_gpu.empty()) {
    std::string error;
    auto csv = vgpu::smi::render_query(shown, o.query_gpu, o.noheader, o.nounits, &error);
    if (!csv) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 2;
    }
    out = *csv;
  } else if (o.list) {
    out = vgpu::smi::render_list(shown);
  } else if (o.vgpu_only) {
    out = vgpu::smi::render_vgpu(shown);
  } else {
    out = vgpu::smi::render_table(shown, true);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  vgpu::smi::Options o;
  if (auto error = vgpu::smi::parse_options(argc, argv, &o)) {
    std::fprintf(stderr, "%s\n\nPlease run 'vgpu-smi -h' for help.\n", error->c_str());
    return 2;
  }
  if (o.help) {
    std::fputs(vgpu::smi::usage_text(), stdout);
    return 0;
  }
  if (o.help_query_gpu) {  // one field a line, as nvidia-smi names them: "name" or "gpu_name"
    for (const vgpu::smi::QueryField& f : vgpu::smi::gpu_query_fields()) {
      std::string line = "\"" + f.name + "\"";
      for (const std::string& a : f.aliases) line += " or \"" + a + "\"";
      if (!f.unit.empty()) line += "  [" + f.unit + "]";
      std::puts(line.c_str());
    }
    return 0;
  }
  if (!o.loop_s) return print_once(o);
  for (;;) {  // until interrupted, as nvidia-smi -l
    if (int rc = print_once(o); rc != 0) return rc;
    std::this_thread::sleep_for(std::chrono::duration<double>(*o.loop_s));
    if (o.query_gpu.empty()) std::fputs("\n", stdout);
  }
} catch (const std::exception& e) {  // out of memory, mostly: one line and a failure code
  std::fprintf(stderr, "vgpu-smi: %s\n", e.what());
  return 1;
}
