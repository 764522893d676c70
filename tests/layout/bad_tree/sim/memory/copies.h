// Fixture for check_includes_catches: sim/memory -> sim/core (allowed alone), closing the cycle
// core -> exec -> memory -> core: counted once.
#pragma once
#include "../core/root.h"
