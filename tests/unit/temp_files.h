// Moved to tests/support/temp_files.h; this name stays for the server
// tests, which include it by its old path.
#pragma once

#include "../support/temp_files.h"
