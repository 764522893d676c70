// Fixture for check_includes_catches: a sim backend header others must not include.
#pragma once
