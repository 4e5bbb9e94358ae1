// Whether this test binary is built with a sanitizer (scripts/sanitize.sh).
// A test that cannot run instrumented skips itself with the reason.
#pragma once

namespace hedgedb {
namespace testing_util {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace testing_util
}  // namespace hedgedb
