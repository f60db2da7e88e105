// The only header through which logsync reaches libcurl.
//
// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: each option logsync sets
// gets a typed static inline wrapper here, by the type of its argument.
#ifndef LOGSYNC_CCURL_SHIM_H
#define LOGSYNC_CCURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*ccurl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode ccurl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

// libcurl copies string options (since 7.17), so the caller's string may go away after the call.
static inline CURLcode ccurl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

// For options that keep the pointer (CURLOPT_POSTFIELDS, CURLOPT_WRITEDATA, CURLOPT_HTTPHEADER): the
// caller keeps it valid until the transfer ends or the option is set again.
static inline CURLcode ccurl_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_setopt_callback(CURL *handle, CURLoption option, ccurl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

typedef int (*ccurl_progress_callback)(void *context, curl_off_t download_total, curl_off_t download_now,
                                       curl_off_t upload_total, curl_off_t upload_now);

// CURLOPT_XFERINFOFUNCTION: return non-zero to abort the transfer (CURLE_ABORTED_BY_CALLBACK).
static inline CURLcode ccurl_setopt_progress(CURL *handle, CURLoption option, ccurl_progress_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_response_code(CURL *handle, long *code) {
    return curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, code);
}

static inline CURLcode ccurl_connect_count(CURL *handle, long *count) {
    return curl_easy_getinfo(handle, CURLINFO_NUM_CONNECTS, count);
}

#endif
