// The one header through which logsync reaches the GNU extensions of glibc it starts children with
// (LogsyncPlatform's ChildProcess).
//
// posix_spawn_file_actions_addclosefrom_np (glibc 2.34; Debian 12 has 2.36) and pipe2 are declared only
// under _GNU_SOURCE, which Swift's Glibc module is built without: declared here as glibc does.
#ifndef LOGSYNC_CSPAWN_SHIM_H
#define LOGSYNC_CSPAWN_SHIM_H

#include <spawn.h>

extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
extern int pipe2(int descriptors[2], int flags);

#endif
