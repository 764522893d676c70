// Fixture for check_includes_catches: sim/darkapi -> sim/core, a step down on no cycle: not counted.
#pragma once
#include "sim/core/root.h"
