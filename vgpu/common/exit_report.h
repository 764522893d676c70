// Reports a process appends to a file the user named, at exit (VGPU_SIM_MEMORY_REPORT,
// VGPU_CLOCK_REPORT): the ranks of a job may share the file, so each report is one write.
#pragma once

#include <functional>
#include <string>

#include "settings.h"

namespace vgpu {

// Appends `text` to the file setting `id` names ("%p" in it becomes the process id) in one write;
// one warning line when it cannot.
void append_report(settings::Id id, const std::string& text);

// `text` safe inside a JSON string of a report: quotes, backslashes and control characters (a
// thread's name is whatever the program chose) become '_'.
std::string json_safe(std::string text);

// Registers, once per `id`, an exit handler that appends what `make` returns (nothing when
// empty); nothing is registered unless the setting is present. Exceptions never leave the
// handler: it runs at exit inside someone else's process.
void append_report_at_exit(settings::Id id, std::function<std::string()> make);

}  // namespace vgpu
