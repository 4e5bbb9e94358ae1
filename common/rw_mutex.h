// A reader-writer mutex that prefers writers. std::shared_mutex on glibc
// prefers readers, so a steady stream of searches can starve an ingest (or a
// knob change) forever. Usable with std::shared_lock / std::unique_lock.
// Not recursive: a thread holding it shared must not take it shared again.
#pragma once

#include <pthread.h>

namespace hedgedb {

class RwMutex {
 public:
  RwMutex() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~RwMutex() { pthread_rwlock_destroy(&lock_); }
  RwMutex(const RwMutex&) = delete;
  RwMutex& operator=(const RwMutex&) = delete;

  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace hedgedb
