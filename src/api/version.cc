#include "pmindex/version.h"

namespace pmindex {

const char* version() { return PMINDEX_VERSION_STRING; }

}  // namespace pmindex
