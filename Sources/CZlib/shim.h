// The only header through which logsync reaches zlib.
//
// deflateInit and inflateInit are macros that pass the library version and the size of z_stream, which
// Swift cannot import: initialise streams through these wrappers instead.
#ifndef LOGSYNC_CZLIB_SHIM_H
#define LOGSYNC_CZLIB_SHIM_H

#include <zlib.h>

static inline int czlib_deflate_init(z_streamp stream, int level) {
    return deflateInit(stream, level);
}

static inline int czlib_inflate_init(z_streamp stream) {
    return inflateInit(stream);
}

#endif
