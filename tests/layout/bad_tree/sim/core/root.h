// Fixture for check_includes_catches: sim/core -> sim/exec, one step of a cycle.
#pragma once
#include "sim/exec/streams.h"
