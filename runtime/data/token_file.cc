// TokenWindows: a mapped token file read as windows, in order or at offsets drawn per (seed, epoch,
// example).
#include "runtime/data/token_file.h"

#include <cstring>

#include "runtime/data/mapped_file.h"
#include "runtime/random.h"

namespace mirra::runtime::data {

namespace {

class TokenWindows final : public ExampleSource {
 public:
  TokenWindows(std::shared_ptr<const MappedFile> file, const TokenWindowOptions& options)
      : file_(std::move(file)), options_(options) {
    name_ = "token file '" + file_->path() + "'";
    token_bytes_ = element_size(options.type);
    tokens_ = static_cast<int64_t>(file_->bytes().size() / token_bytes_);
    fields_ = {{"inputs", options.type, {options.context}}, {"targets", options.type, {options.context}}};
  }

  const std::string& name() const override { return name_; }
  const std::vector<Field>& fields() const override { return fields_; }
  int64_t size() const override { return (tokens_ - 1) / options_.context; }
  int64_t tokens() const { return tokens_; }

  graph::Status read(int64_t index, const Draw& draw, std::span<std::byte* const> out) const override {
    if (index < 0 || index >= size()) {
      return graph::invalid_argument(name_ + ": window " + std::to_string(index) + " of " + std::to_string(size()) + " does not exist");
    }
    int64_t start = index * options_.context;
    if (options_.random_offsets) {
      // Every window of context + 1 tokens the file holds starts in [0, tokens - context - 1].
      Random rng(Random::mix(draw.seed ^ Random::mix(static_cast<uint64_t>(draw.epoch) ^ Random::mix(static_cast<uint64_t>(index)))));
      start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(tokens_ - options_.context)));
    }
    const std::byte* window = file_->bytes().data() + static_cast<size_t>(start) * token_bytes_;
    const size_t bytes = static_cast<size_t>(options_.context) * token_bytes_;
    if (out.size() > 0 && out[0] != nullptr) std::memcpy(out[0], window, bytes);
    if (out.size() > 1 && out[1] != nullptr) std::memcpy(out[1], window + token_bytes_, bytes);
    return graph::Status();
  }

 private:
  std::shared_ptr<const MappedFile> file_;
  TokenWindowOptions options_;
  std::string name_;
  size_t token_bytes_ = 1;
  int64_t tokens_ = 0;
  std::vector<Field> fields_;
};

}  // namespace

graph::Expected<std::shared_ptr<const ExampleSource>> token_windows(const std::string& path, const TokenWindowOptions& options) {
  const std::string name = "token file '" + path + "'";
  if (options.type != ElementType::u8 && options.type != ElementType::u16 && options.type != ElementType::u32) {
    return graph::invalid_argument(name + ": tokens are u8 (bytes of text), u16 or u32, not " + std::string(element_type_name(options.type)));
  }
  if (options.context < 1 || options.context > (int64_t{1} << 24)) {
    return graph::invalid_argument(name + ": the context must be in [1, 16777216] tokens, not " + std::to_string(options.context));
  }
  MIRRA_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  const size_t token_bytes = element_size(options.type);
  if (file->bytes().size() % token_bytes != 0) {
    return graph::invalid_argument(name + ": " + std::to_string(file->bytes().size()) + " bytes is not a whole number of " +
                                   std::string(element_type_name(options.type)) + " tokens (a truncated file, or another token type)");
  }
  auto source = std::make_shared<TokenWindows>(std::move(file), options);
  if (source->tokens() < options.context + 1) {
    return graph::invalid_argument(name + ": " + std::to_string(source->tokens()) + " tokens, fewer than one window of " +
                                   std::to_string(options.context) + " + 1");
  }
  return std::shared_ptr<const ExampleSource>(std::move(source));
}

}  // namespace mirra::runtime::data
