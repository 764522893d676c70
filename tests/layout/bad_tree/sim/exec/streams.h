// Fixture for check_includes_catches: sim/exec -> sim/memory (allowed alone), one step of a cycle.
#pragma once
#include "sim/memory/copies.h"
