// model_builder: the example models by name.
#include "examples/models.h"

#include <utility>

namespace mirra::examples {

namespace {

constexpr std::pair<std::string_view, ModelBuilder> kModels[] = {
    {"mlp", build_mlp},           {"cnn", build_cnn},           {"resnet20", build_resnet20},
    {"resnet18", build_resnet18}, {"resnet50", build_resnet50}, {"resnet101", build_resnet101},
    {"vgg16", build_vgg16},       {"inception_v3", build_inception_v3}};

}  // namespace

ModelBuilder model_builder(std::string_view name) {
  for (const auto& [model, builder] : kModels) {
    if (model == name) return builder;
  }
  return nullptr;
}

std::string model_names() {
  std::string names;
  for (const auto& [model, builder] : kModels) names += (names.empty() ? "" : ", ") + std::string(model);
  return names;
}

}  // namespace mirra::examples
