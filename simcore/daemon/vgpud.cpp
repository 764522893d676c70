// vgpud: the per-job simulation daemon over the real engine and the configured cluster (the
// cluster comes from the daemon's environment, which it inherits from the rank that started it:
// VGPU_CONFIG, VGPU_NODES, ...).
#include "daemon_main.h"
#include "common/settings.h"
#include "simcore/cluster_config.h"

int main(int argc, char** argv) {
  return simcore::daemon::vgpud_main(
      argc, argv, [](std::string* error) -> std::unique_ptr<simcore::Engine> {
        simcore::ConfigResult config = simcore::load_cluster_config();
        if (!config.ok()) {
          *error = config.error.to_string();
          return nullptr;
        }
        // Timeline entries of reclaimed events only when asked: a long job's vgpud stays bounded.
        simcore::EngineOptions options;
        options.record_timeline = vgpu::settings::flag(vgpu::settings::Id::daemon_timeline);
        options.huge_pages = true;  // (the daemon's own process: no virtual clock to charge)
        return simcore::make_engine(*config.cluster, options);
      });
}
