// The bounds a file must keep before mirra allocates anything it describes: no size read from a file
// is trusted until it is checked against these and against the bytes actually present.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mirra::serialization {

inline constexpr uint64_t kMaxFileBytes = (uint64_t{1} << 31) - 1;  // FlatBuffers' own limit
inline constexpr int kMaxRank = 8;
inline constexpr int64_t kMaxDim = int64_t{1} << 31;
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 31;  // also for variables created from an initialiser
inline constexpr size_t kMaxNodes = size_t{1} << 22;
// Model files: this build writes version 4 and reads 1 to 4 (see Note [Model file versions] in
// model_reader.cc). Checkpoints: version 1.
inline constexpr uint32_t kModelFormatVersion = 4;
inline constexpr uint32_t kOldestModelFormatVersion = 1;
inline constexpr uint32_t kCheckpointFormatVersion = 1;

}  // namespace mirra::serialization
