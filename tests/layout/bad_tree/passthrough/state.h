// Fixture for check_includes_catches: one backend reaching across into the other.
#pragma once
#include "sim/state.h"
