// Model files: exact round trips (graph text, every weight bit, signature, metadata), 64-byte-aligned
// weights, and the classic malformed files, each rejected with an error that names the problem.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "examples/example_models.h"
#include "graph/print.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "serialization/model_file.h"
#include "tests/serialization/tiny_model.h"

namespace mirra::serialization {

namespace {

std::vector<uint8_t> bytes_of(const Model& model) {
  auto bytes = serialize_model(model);
  REQUIRE(bytes.ok());
  return {bytes->data(), bytes->data() + bytes->size()};
}

graph::Status parse_status(const std::vector<uint8_t>& bytes) {
  return parse_model(bytes, ops::registry(), "test.mirra").status();
}

void require_rejected(const std::vector<uint8_t>& bytes, const std::string& expected) {
  const graph::Status status = parse_status(bytes);
  REQUIRE_FALSE(status.ok());
  INFO(status.message());
  CHECK(status.code() == graph::StatusCode::invalid_argument);
  CHECK(status.message().find(expected) != std::string::npos);
}

void require_same(const Model& a, const Model& b) {
  CHECK(graph::to_text(a.graph) == graph::to_text(b.graph));
  REQUIRE(a.weights.size() == b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    CHECK(a.weights[i].name == b.weights[i].name);
    CHECK(a.weights[i].value == b.weights[i].value);  // type and every byte
  }
  CHECK(a.signature == b.signature);
  CHECK(a.metadata == b.metadata);
}

fb::Model* mutable_model(std::vector<uint8_t>& bytes) { return fb::GetMutableModel(bytes.data()); }

uint32_t node_index(const std::vector<uint8_t>& bytes, const std::string& name) {
  const auto* nodes = fb::GetModel(bytes.data())->graph()->nodes();
  for (uint32_t i = 0; i < nodes->size(); ++i) {
    if (nodes->Get(i)->name()->str() == name) return i;
  }
  FAIL("no node " << name);
  return 0;
}

}  // namespace

TEST_CASE("ModelFile.round_trip.is_exact") {
  for (const char* name : {"mlp", "cnn", "resnet20"}) {
    CAPTURE(name);
    auto model = examples::build_example_model(name, 7);
    REQUIRE(model.ok());
    model->metadata.created = "2026-11-29T00:00:00Z";
    model->metadata.producer = "mirra 0.1.0";
    const std::vector<uint8_t> bytes = bytes_of(*model);
    auto loaded = parse_model(bytes, ops::registry());
    REQUIRE(loaded.ok());
    require_same(*model, *loaded);
    CHECK(bytes_of(*loaded) == bytes);  // and writing it again gives the same file
  }
}

// Nodes keep their devices, a device of another task included.
TEST_CASE("ModelFile.round_trip.keeps_devices_and_their_tasks") {
  Model model = testing::tiny_model();
  REQUIRE(model.graph.size() >= 2);
  model.graph.mutable_node(0).device = graph::DeviceId{graph::DeviceKind::gpu, 1, 2};
  model.graph.mutable_node(1).device = graph::DeviceId{graph::DeviceKind::cpu_async, 0};
  auto loaded = parse_model(bytes_of(model), ops::registry());
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK(loaded->graph.node(0).device == graph::DeviceId{graph::DeviceKind::gpu, 1, 2});
  CHECK(loaded->graph.node(1).device == graph::DeviceId{graph::DeviceKind::cpu_async, 0});
  require_same(model, *loaded);
}

TEST_CASE("ModelFile.round_trip.every_attribute_kind") {
  const Model model = testing::tiny_cnn_model();  // strings, int lists, shapes, a tensor, optimizer state
  auto loaded = parse_model(bytes_of(model), ops::registry());
  REQUIRE(loaded.ok());
  require_same(model, *loaded);
  graph::AttrMap all = {{"i", int64_t{-3}},
                        {"r", 0.1},
                        {"b", true},
                        {"s", std::string("SAME")},
                        {"d", graph::DType::u8},
                        {"shape", graph::Shape{-1, 7}},
                        {"il", std::vector<int64_t>{1, -2}},
                        {"rl", std::vector<double>{0.5, -1e300}},
                        {"sl", std::vector<std::string>{"a", ""}},
                        {"t", graph::TensorValue::from<double>(graph::Shape{2}, std::vector<double>{1, 2})},
                        {"d16", graph::DType::bf16},
                        {"tb", graph::TensorValue::from<graph::bfloat16>(
                                   graph::Shape{2}, std::vector<graph::bfloat16>{graph::bfloat16(0.1f), graph::bfloat16(-3e38f)})},
                        {"th", graph::TensorValue::from<graph::float16>(
                                   graph::Shape{2}, std::vector<graph::float16>{graph::float16(0.1f), graph::float16(-65504.0f)})}};
  Model with_attrs = testing::tiny_model();
  with_attrs.signature.optimizer.hyper_parameters = all;  // the one place that takes any attribute
  auto back = parse_model(bytes_of(with_attrs), ops::registry());
  REQUIRE(back.ok());
  CHECK(back->signature.optimizer.hyper_parameters == all);
}

TEST_CASE("ModelFile.round_trip.through_a_file") {
  Model model = testing::tiny_model();
  model.signature.optimizer.state = {{"dense/w/momentum", graph::TensorValue::from<float>(graph::Shape{2}, std::vector<float>{1.5f, -2})},
                                     {"optimizer/iterations", graph::TensorValue::from<int64_t>(graph::Shape{}, std::vector<int64_t>{42})}};
  const std::string path = "round_trip_test.mirra";
  REQUIRE(save_model(model, path).ok());
  auto loaded = load_model(path, ops::registry());
  REQUIRE(loaded.ok());
  require_same(model, *loaded);
  std::remove(path.c_str());
}

TEST_CASE("ModelFile.weights.are_64_byte_aligned") {
  auto model = examples::build_example_model("mlp", 1);
  REQUIRE(model.ok());
  const std::vector<uint8_t> bytes = bytes_of(*model);
  const fb::Model* file = fb::GetModel(bytes.data());
  REQUIRE(file->weights()->size() == 6);
  for (const fb::Tensor* tensor : *file->weights()) {
    CAPTURE(tensor->name()->str());
    CHECK((tensor->data()->data() - bytes.data()) % 64 == 0);
  }
}

TEST_CASE("ModelFile.metadata.is_filled_in") {
  Model model = testing::tiny_model();
  model.metadata = {};
  auto loaded = parse_model(bytes_of(model), ops::registry());
  REQUIRE(loaded.ok());
  CHECK(loaded->metadata.producer.starts_with("mirra "));
  CHECK(loaded->metadata.created.size() == 20);  // 2026-11-29T22:21:56Z
}

// A cut file fails to load, unless the cut removed only the zero padding that aligns the end of the
// buffer; then it loads as the same model.
TEST_CASE("ModelFile.malformed.truncated_at_every_offset") {
  const Model model = testing::tiny_model();
  const std::vector<uint8_t> bytes = bytes_of(model);
  REQUIRE(parse_status(bytes).ok());
  size_t padding = 0;
  while (padding < bytes.size() && bytes[bytes.size() - 1 - padding] == 0) ++padding;
  for (size_t size = 0; size < bytes.size(); ++size) {
    CAPTURE(size);
    auto loaded = parse_model(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(size)), ops::registry());
    if (loaded.ok()) {
      REQUIRE(size >= bytes.size() - padding);
      require_same(model, *loaded);
    }
  }
}

TEST_CASE("ModelFile.malformed.random_byte_flips_never_crash") {
  const std::vector<uint8_t> bytes = bytes_of(testing::tiny_model());
  std::mt19937 rng(11);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> corrupted = bytes;
    const int flips = 1 + trial % 4;
    for (int f = 0; f < flips; ++f) corrupted[rng() % corrupted.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto model = parse_model(corrupted, ops::registry());
    if (model.ok()) {
      ++accepted;  // a flip in a name or a float: still a valid model, and it must write back out
      CHECK(serialize_model(*model).ok());
    }
  }
  MESSAGE(accepted << " of 3000 corrupted files were still valid models");
}

TEST_CASE("ModelFile.malformed.framing") {
  std::vector<uint8_t> bytes = bytes_of(testing::tiny_model());
  SUBCASE("wrong identifier") {
    std::memcpy(bytes.data() + 4, "ONNX", 4);
    require_rejected(bytes, "not a mirra model file");
  }
  SUBCASE("unsupported format version") {
    REQUIRE(mutable_model(bytes)->mutate_format_version(99));
    require_rejected(bytes, "format version 99 is not supported");
  }
  SUBCASE("root offset out of range") {
    const uint32_t huge = 0x7ffffff0;
    std::memcpy(bytes.data(), &huge, 4);
    require_rejected(bytes, "FlatBuffers verifier");
  }
  SUBCASE("a vector length out of range") {
    // The weights vector's length word, pointed past the end of the buffer.
    const auto* weights = fb::GetModel(bytes.data())->weights();
    const size_t length_at = static_cast<size_t>(reinterpret_cast<const uint8_t*>(weights) - bytes.data());
    const uint32_t huge = 0x10000000;
    std::memcpy(bytes.data() + length_at, &huge, 4);
    require_rejected(bytes, "FlatBuffers verifier");
  }
  SUBCASE("empty") { require_rejected({}, "not a mirra model file"); }
}

TEST_CASE("ModelFile.malformed.references") {
  std::vector<uint8_t> bytes = bytes_of(testing::tiny_model());
  fb::Model* file = mutable_model(bytes);
  auto* nodes = file->mutable_graph()->mutable_nodes();
  const uint32_t matmul = node_index(bytes, "MatMul");
  auto* inputs = nodes->GetMutableObject(matmul)->mutable_inputs();
  SUBCASE("a node used as its own input") {
    inputs->GetMutableObject(0)->mutate_node(matmul);
    require_rejected(bytes, "does not come before it");
  }
  SUBCASE("a cycle through a later node") {
    inputs->GetMutableObject(0)->mutate_node(matmul + 2);
    require_rejected(bytes, "a cycle");
  }
  SUBCASE("an input index out of range") {
    inputs->GetMutableObject(0)->mutate_node(0xfffffff0u);
    require_rejected(bytes, "does not come before it");
  }
  SUBCASE("an output index out of range") {
    inputs->GetMutableObject(0)->mutate_output(5);
    require_rejected(bytes, "reads output 5");
  }
  SUBCASE("features out of range") {
    REQUIRE(file->mutable_signature()->mutate_features(100000));
    require_rejected(bytes, "features (node 100000) is not a Placeholder");
  }
  SUBCASE("labels not a placeholder") {
    REQUIRE(file->mutable_signature()->mutate_labels(matmul));
    require_rejected(bytes, "labels");
  }
  SUBCASE("loss out of range") {
    file->mutable_signature()->mutable_loss()->mutate_node(nodes->size());
    require_rejected(bytes, "loss reads node");
  }
  SUBCASE("loss not a scalar") {
    file->mutable_signature()->mutable_loss()->mutate_node(matmul);
    require_rejected(bytes, "floating scalar");
  }
  SUBCASE("metric out of range") {
    file->mutable_signature()->mutable_metrics()->GetMutableObject(0)->mutable_value()->mutate_output(3);
    require_rejected(bytes, "metric 'correct'");
  }
}

TEST_CASE("ModelFile.malformed.control_input_out_of_range") {
  Model model = testing::tiny_model();
  const graph::NodeId w = *model.graph.find("dense/w");
  model.graph.add_control_edge(*model.graph.find("images"), w);
  std::vector<uint8_t> bytes = bytes_of(model);
  REQUIRE(parse_status(bytes).ok());
  auto* node = mutable_model(bytes)->mutable_graph()->mutable_nodes()->GetMutableObject(node_index(bytes, "dense/w"));
  node->mutable_control_inputs()->Mutate(0, 77777);
  require_rejected(bytes, "runs after node 77777");
}

TEST_CASE("ModelFile.malformed.tensors") {
  std::vector<uint8_t> bytes = bytes_of(testing::tiny_model());
  fb::Tensor* weight = mutable_model(bytes)->mutable_weights()->GetMutableObject(0);  // dense/w f32[4,3]
  REQUIRE(weight->name()->str() == "dense/w");
  SUBCASE("negative dimension") {
    weight->mutable_shape()->Mutate(0, -4);
    require_rejected(bytes, "dimension 0 is -4");
  }
  SUBCASE("enormous dimension") {
    weight->mutable_shape()->Mutate(1, int64_t{1} << 40);
    require_rejected(bytes, "dimension 1 is 1099511627776");
  }
  SUBCASE("element count overflows") {
    weight->mutable_shape()->Mutate(0, int64_t{1} << 31);
    weight->mutable_shape()->Mutate(1, int64_t{1} << 31);
    require_rejected(bytes, "holds more than");
  }
  SUBCASE("size does not match the shape") {
    weight->mutable_shape()->Mutate(0, 5);
    require_rejected(bytes, "holds 48 bytes, but f32[5,3] needs 60");
  }
  SUBCASE("unknown dtype") {
    weight->mutate_dtype(static_cast<fb::DType>(42));
    require_rejected(bytes, "dtype 42 is not known");
  }
  SUBCASE("dtype differs from the variable's") {
    weight->mutate_dtype(fb::DType::I32);
    require_rejected(bytes, "is i32[4,3], but its Variable is f32[4,3]");
  }
  SUBCASE("corrupted data") {
    weight->mutable_data()->Mutate(5, static_cast<uint8_t>(weight->data()->Get(5) ^ 0x40));
    require_rejected(bytes, "checksum mismatch");
  }
}

TEST_CASE("ModelFile.malformed.graph_semantics") {
  Model model = testing::tiny_model();
  const graph::NodeId matmul = *model.graph.find("MatMul");
  const graph::NodeId reshape = *model.graph.find("Reshape");
  SUBCASE("unknown op") {
    model.graph.mutable_node(matmul).op = "MatMulV9";
    require_rejected(bytes_of(model), "unknown op 'MatMulV9'");
  }
  SUBCASE("wrong attr type") {
    model.graph.mutable_node(reshape).attrs.set("shape", 2.5);
    require_rejected(bytes_of(model), "shape");
  }
  SUBCASE("unknown attr") {
    model.graph.mutable_node(reshape).attrs.set("colour", std::string("blue"));
    require_rejected(bytes_of(model), "colour");
  }
  SUBCASE("wrong arity") {
    model.graph.mutable_node(matmul).inputs.pop_back();
    require_rejected(bytes_of(model), "MatMul");
  }
  SUBCASE("inconsistent shapes") {
    model.graph.mutable_node(reshape).attrs.set("shape", std::vector<int64_t>{-1, 3});
    require_rejected(bytes_of(model), "MatMul");  // [?,3] x [4,3]
  }
  SUBCASE("a share of sharded optimizer state") {
    model.graph.mutable_node(*model.graph.find("dense/b")).attrs.set("shard_of", graph::Shape{3, 2});
    require_rejected(bytes_of(model), "shard_of marks a replica's share of sharded optimizer state, which no model file holds");
  }
  SUBCASE("a parameter server's part of a variable") {
    graph::Node& b = model.graph.mutable_node(*model.graph.find("dense/b"));
    b.attrs.set("partition_of", graph::Shape{6});
    b.attrs.set("partition_offset", int64_t{0});
    require_rejected(bytes_of(model), "partition_of marks a parameter server's part of a variable, which no model file holds");
  }
  SUBCASE("a weight for no variable") {
    model.weights.push_back({"MatMul", model.weights[0].value});
    CHECK_FALSE(serialize_model(model).ok());  // the writer refuses too
  }
}

// Attribute values out of their op's range are rejected by the op's schema, node by node.
TEST_CASE("ModelFile.malformed.attribute_ranges") {
  struct Case {
    const char* op;
    const char* attr;
    graph::AttrValue value;
  };
  const Case cases[] = {
      {"Conv2D", "strides", std::vector<int64_t>{0, 1}},
      {"Conv2D", "strides", std::vector<int64_t>{1}},
      {"Conv2D", "dilations", std::vector<int64_t>{-1, 1}},
      {"Conv2D", "padding", std::string("FULL")},
      {"Conv2D", "data_format", std::string("WHCN")},
      {"MaxPool", "ksize", std::vector<int64_t>{0, 2}},
      {"MaxPool", "strides", std::vector<int64_t>{2, -2}},
      {"MaxPool", "ksize", std::vector<int64_t>{int64_t{1} << 40, 2}},
      {"Reshape", "shape", std::vector<int64_t>{-2, 8}},
      {"Reshape", "shape", std::vector<int64_t>{-1, -1}},
      {"Reshape", "shape", std::vector<int64_t>{int64_t{1} << 62, 4, 4}},
      {"ArgMax", "axis", int64_t{7}},
      {"ArgMax", "axis", int64_t{-9}},
      {"Cast", "dtype", graph::DType::boolean},
  };
  for (const Case& c : cases) {
    CAPTURE(c.op);
    CAPTURE(c.attr);
    CAPTURE(graph::attr_to_string(c.value));
    Model model = testing::tiny_cnn_model();
    graph::NodeId target = graph::kInvalidNode;
    for (const graph::Node& node : model.graph.nodes()) {
      if (node.op == c.op) target = node.id;
    }
    REQUIRE(target != graph::kInvalidNode);
    model.graph.mutable_node(target).attrs.set(c.attr, c.value);
    const graph::Status status = parse_status(bytes_of(model));
    CHECK_FALSE(status.ok());
    CHECK(status.code() == graph::StatusCode::invalid_argument);
  }
}

}  // namespace mirra::serialization

namespace mirra::serialization {

// A reduction's "axes": absent reduces over every axis and an empty list over none (TensorFlow), from
// format version 2 on; a version 1 file wrote an empty list for every axis and keeps that meaning.
TEST_CASE("ModelFile.versions.reduction_axes_keep_their_meaning") {
  Model model = testing::tiny_model();
  const graph::NodeId mean = *model.graph.find("objective/ReduceMean");  // the loss: a mean over the batch
  CHECK_FALSE(model.graph.node(mean).attrs.contains("axes"));
  std::vector<uint8_t> bytes = bytes_of(model);
  CHECK(fb::GetModel(bytes.data())->format_version() == 4);
  auto loaded = parse_model(bytes, ops::registry());
  REQUIRE(loaded.ok());
  CHECK(loaded->graph.type(loaded->signature.loss).to_string() == "f32[]");
  CHECK_FALSE(loaded->graph.node(mean).attrs.contains("axes"));  // absent stays absent

  model.graph.mutable_node(mean).attrs.set("axes", std::vector<int64_t>{});
  bytes = bytes_of(model);
  require_rejected(bytes, "the signature's loss must be a floating scalar, not f32[?]");  // version 2 on: over none
  REQUIRE(mutable_model(bytes)->mutate_format_version(1));
  auto old = parse_model(bytes, ops::registry());
  REQUIRE(old.ok());  // version 1: over every axis
  CHECK(old->graph.type(old->signature.loss).to_string() == "f32[]");
  CHECK_FALSE(old->graph.node(mean).attrs.contains("axes"));
  REQUIRE(mutable_model(bytes)->mutate_format_version(5));
  require_rejected(bytes, "format version 5 is not supported (this build reads 1 to 4)");
}

// Version 3's state updates: a moving mean the train step writes, kept with its variable's
// aggregation; a state update that is no write of a variable, or names no node, is refused.
TEST_CASE("ModelFile.state_updates.round_trip_and_are_checked") {
  Model model = testing::tiny_model();
  {
    graph::Builder b(model.graph, ops::registry());
    auto scope = b.scope("stats");
    const graph::ValueRef images = {*model.graph.find("images"), 0};
    const graph::ValueRef mean = ops::variable(b, "moving_mean", {2, 2, 1}, ops::Initializer::zeros(), graph::DType::f32,
                                               false, ops::VariableAggregation::mean);
    ops::assign(b, mean, ops::reduce_mean(b, images, {0}));
    REQUIRE(b.status().ok());
  }
  model.signature.state_updates = {"stats/Assign"};
  std::vector<uint8_t> bytes = bytes_of(model);
  auto loaded = parse_model(bytes, ops::registry());
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  require_same(model, *loaded);
  CHECK(ops::variable_aggregation(loaded->graph.node(*loaded->graph.find("stats/moving_mean"))) ==
        ops::VariableAggregation::mean);

  auto* updates = mutable_model(bytes)->mutable_signature()->mutable_state_updates();
  REQUIRE(updates->size() == 1);
  SUBCASE("no write of a variable") {
    updates->Mutate(0, node_index(bytes, "stats/ReduceMean"));
    require_rejected(bytes, "the signature's state update (node " + std::to_string(node_index(bytes, "stats/ReduceMean")) +
                                ") is no write of a variable");
  }
  SUBCASE("out of range") {
    updates->Mutate(0, 0xfffffff0u);
    require_rejected(bytes, "the signature's state update (node 4294967280) is no write of a variable");
  }
  SUBCASE("a name the writer cannot find") {
    model.signature.state_updates = {"stats/nothing"};
    CHECK(serialize_model(model).status().message() == "the signature's state update 'stats/nothing' is not a node of the graph");
  }
}

// Version 4's batch inputs: kept with their axes when declared, none when not (an older file's rule:
// every placeholder whose dim 0 is unknown); refused when one is no Placeholder, lacks its axis, appears
// twice or the declaration leaves out the features.
TEST_CASE("ModelFile.batch_inputs.round_trip_and_are_checked") {
  Model model = testing::tiny_model();
  std::vector<uint8_t> bytes = bytes_of(model);
  REQUIRE(fb::GetModel(bytes.data())->signature()->batch_inputs() != nullptr);
  CHECK(fb::GetModel(bytes.data())->signature()->batch_inputs()->size() == 0);
  auto implicit = parse_model(bytes, ops::registry());
  REQUIRE_MESSAGE(implicit.ok(), implicit.status().to_string());
  CHECK(implicit->signature.batch_inputs.empty());

  model.signature.batch_inputs = {{"images", 1}, {"labels", 0}};
  bytes = bytes_of(model);
  auto loaded = parse_model(bytes, ops::registry());
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  require_same(model, *loaded);
  CHECK(loaded->signature.batch_inputs == std::vector<BatchInput>{{"images", 1}, {"labels", 0}});

  auto* inputs = mutable_model(bytes)->mutable_signature()->mutable_batch_inputs();
  REQUIRE(inputs->size() == 2);
  SUBCASE("no Placeholder") {
    const uint32_t loss = node_index(bytes, model.graph.node(model.signature.loss.node).name);
    inputs->GetMutableObject(1)->mutate_placeholder(loss);
    require_rejected(bytes, "the signature's batch input (node " + std::to_string(loss) + ") is not a Placeholder");
  }
  SUBCASE("out of range") {
    inputs->GetMutableObject(0)->mutate_placeholder(0xfffffff0u);
    require_rejected(bytes, "the signature's batch input (node 4294967280) is not a Placeholder");
  }
  SUBCASE("an axis the placeholder lacks") {
    inputs->GetMutableObject(0)->mutate_axis(4);
    require_rejected(bytes, "the signature's batch input 'images' has no axis 4 (it has 4)");
  }
  SUBCASE("twice") {
    inputs->GetMutableObject(1)->mutate_placeholder(node_index(bytes, "images"));
    require_rejected(bytes, "the signature's batch input 'images' appears twice");
  }
  SUBCASE("without the features") {
    model.signature.batch_inputs = {{"labels", 0}};
    require_rejected(bytes_of(model), "the signature's batch inputs leave out the features 'images'");
  }
  SUBCASE("a name the writer cannot find") {
    model.signature.batch_inputs = {{"images", 0}, {"nothing", 0}};
    CHECK(serialize_model(model).status().message() == "the signature's batch input 'nothing' is not a node of the graph");
  }
}

// Version 3's loss weight and metric reductions: kept when declared, absent when not (a version 2 file
// has none; its metrics are sums), and refused when a weight is no floating scalar or reads no value,
// or a reduction is unknown.
TEST_CASE("ModelFile.loss_weight.round_trips_and_is_checked") {
  Model model = testing::tiny_model();
  CHECK(fb::GetModel(bytes_of(model).data())->signature()->loss_weight() == nullptr);
  graph::Builder b(model.graph, ops::registry());
  const graph::ValueRef losses = model.graph.node(model.signature.loss.node).inputs[0];  // of the loss's mean
  model.signature.loss_weight = ops::cast(b, ops::dim_size(b, losses, 0), graph::DType::f32);
  model.signature.metrics.push_back({.name = "per_example", .value = model.signature.loss, .reduction = "mean",
                                     .weight = model.signature.loss_weight});
  REQUIRE(b.status().ok());
  std::vector<uint8_t> bytes = bytes_of(model);
  auto loaded = parse_model(bytes, ops::registry());
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  require_same(model, *loaded);
  auto* weight = mutable_model(bytes)->mutable_signature()->mutable_loss_weight();
  SUBCASE("not a scalar") {
    weight->mutate_node(node_index(bytes, "images"));
    require_rejected(bytes, "the signature's loss weight must be a floating scalar, not f32[?,2,2,1]");
  }
  SUBCASE("out of range") {
    weight->mutate_output(4);
    require_rejected(bytes, "the signature's loss weight reads node");
  }
  SUBCASE("a metric's unknown reduction") {
    auto* reduction = mutable_model(bytes)->mutable_signature()->mutable_metrics()->GetMutableObject(1)->mutable_reduction();
    REQUIRE(reduction->str() == "mean");
    reduction->data()[3] = 'x';
    require_rejected(bytes, "metric 'per_example' has reduction 'meax' (sum, mean or exp_mean)");
  }
  SUBCASE("a metric's weight out of range") {
    mutable_model(bytes)->mutable_signature()->mutable_metrics()->GetMutableObject(1)->mutable_weight()->mutate_node(1u << 30);
    require_rejected(bytes, "the signature's weight of metric 'per_example' reads node");
  }
}

}  // namespace mirra::serialization
