/*
 * daqiri-gateway: versions (Apache-2.0).
 *
 * DAQIRI_VERSION_* is the DAQIRI release whose API this library provides
 * (what DAQIRI's programs check); DAQIRI_GATEWAY_* is this library's own.
 */
#ifndef DAQIRI_VERSION_H
#define DAQIRI_VERSION_H

#define DAQIRI_VERSION_YEAR 2026
#define DAQIRI_VERSION_MONTH 7
#define DAQIRI_VERSION_PATCH 0
#define DAQIRI_VERSION_STRING "2026.7.0"
/* The shared library's ABI: libdaqiri.so.1. */
#define DAQIRI_ABI_VERSION 1
#define DAQIRI_GATEWAY_ABI_VERSION DAQIRI_ABI_VERSION

#ifdef __cplusplus
namespace daqiri {
inline const char *version_string() { return DAQIRI_VERSION_STRING; }
inline int version_year() { return DAQIRI_VERSION_YEAR; }
inline int version_month() { return DAQIRI_VERSION_MONTH; }
inline int version_patch() { return DAQIRI_VERSION_PATCH; }
inline int abi_version() { return DAQIRI_ABI_VERSION; }
}  // namespace daqiri
#endif

#endif /* DAQIRI_VERSION_H */
