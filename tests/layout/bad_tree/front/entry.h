// Fixture for check_includes_catches: the front reaching up into a backend.
#pragma once
#include "sim/state.h"
