// vgpud: the per-job simulation daemon over the real engine and the configured cluster (the
// cluster comes from the daemon's environment, which it inherits from the rank that started it:
// VGPU_CONFIG, VGPU_NODES, ...).
#include "daemon_main.h"
#include "simcore/cluster_config.h"

int main(int argc, char** argv) {
  return simcore::daemon::vgpud_main(
      argc, argv, [](std::string* error) -> std::unique_ptr<simcore::Engine> {
        simcore::ConfigResult config = simcore::load_cluster_config();
        if (!config.ok()) {
          *error = config.error.to_string();
          return nullptr;
        }
        return simcore::make_engine(*config.cluster);
      });
}
