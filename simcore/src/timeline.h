// The engine's timeline in the shared trace format (simcore/chrome_trace.h).
#pragma once

#include "simcore/chrome_trace.h"
#include "simcore/engine.h"

namespace simcore::detail {

using simcore::TimelineEntry;
using simcore::chrome_trace_json;
using simcore::append_json_string;

}  // namespace simcore::detail
