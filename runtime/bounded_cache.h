// BoundedCache: what a kernel builds per problem (a oneDNN primitive, a cuDNN plan), keyed by the
// numbers that describe it, kept for the problems seen last: at most `capacity` entries, the least
// recently used one dropped when a new one would pass it. Thread-safe; an entry is shared, so one
// that is dropped while a caller still uses it lives until that caller lets it go. A node whose
// shapes vary (sequence lengths, a partial last batch) therefore holds a bounded number of them.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "graph/check.h"

namespace mirra::runtime {

template <class Key, class Value>
class BoundedCache {
 public:
  explicit BoundedCache(size_t capacity) : capacity_(capacity) { MIRRA_CHECK(capacity > 0, "a cache must hold an entry"); }

  // The entry under `key`, now the most recently used; null when there is none.
  std::shared_ptr<Value> find(const Key& key) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    recency_.splice(recency_.begin(), recency_, it->second.position);
    return it->second.value;
  }

  // Keeps `value` under `key` unless another caller kept one first; returns the one kept.
  std::shared_ptr<Value> insert(const Key& key, std::shared_ptr<Value> value) {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) return it->second.value;
    if (entries_.size() == capacity_) {
      entries_.erase(recency_.back());
      recency_.pop_back();
    }
    recency_.push_front(key);
    entries_.emplace(key, Entry{std::move(value), recency_.begin()});
    return entries_.at(key).value;
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  struct Entry {
    std::shared_ptr<Value> value;
    typename std::list<Key>::iterator position;  // in recency_
  };
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Key> recency_;  // most recently used first
  std::map<Key, Entry> entries_;
};

}  // namespace mirra::runtime
