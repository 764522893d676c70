// Fixture for check_includes_catches: a relative path climbing into a backend.
#pragma once
#include "../sim/state.h"
