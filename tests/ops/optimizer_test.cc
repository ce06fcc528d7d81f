// Optimizers: SGD, Momentum, Nesterov momentum, Adam and AdamW through minimize(), with and without
// global-norm clipping and decoupled weight decay (every kind, skipping excluded names), match the same
// updates written as plain loops; updates wait for every reader
// of their variable and for nothing else of the backward pass; the step counter counts; a small
// classifier learns; Assign writes a value and a sharded optimizer slot (Variable with shard_of) is a
// flat share of its whole.
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

// loss = 0.5 * sum((w - target)^2), so d loss / dw = w - target.
void check_against_loop(const ops::Optimizer& optimizer, graph::DeviceKind kind) {
  CAPTURE(graph::device_kind_name(kind));
  CAPTURE(optimizer.kind);
  CAPTURE(optimizer.nesterov);
  CAPTURE(optimizer.clip_global_norm);
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const std::vector<double> target = {1.0, -2.0, 0.5};
  auto w = ops::variable(b, "w", {3}, ops::Initializer::constant(3.0), DType::f64);
  auto diff = ops::sub(b, w, ops::constant<double>(b, {3}, std::span<const double>(target)));
  auto loss = ops::mul(b, ops::scalar_of(b, 0.5, w), ops::reduce_sum(b, ops::square(b, diff)));
  auto train = ops::minimize(b, loss, optimizer);
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  runtime::Session session(g, ops::kernels(), {.threads = 2, .default_device = {kind, 0}});
  std::vector<double> v(3, 3.0), slot1(3, 0.0), slot2(3, 0.0);
  for (int step = 1; step <= 6; ++step) {
    REQUIRE(session.run({}, std::span<const graph::ValueRef>(), std::vector<graph::NodeId>{train->train}).ok());
    std::vector<double> gradient(3);
    double norm = 0;
    for (size_t i = 0; i < 3; ++i) {
      gradient[i] = v[i] - target[i];
      norm += gradient[i] * gradient[i];
    }
    norm = std::sqrt(norm);
    const double clip = optimizer.clip_global_norm;
    for (size_t i = 0; i < 3; ++i) {
      const double g_i = clip > 0 && norm > clip ? gradient[i] * clip / norm : gradient[i];
      const double lr = optimizer.learning_rate;
      v[i] -= lr * optimizer.weight_decay * v[i];  // decoupled: the variable shrinks first
      if (optimizer.kind == "sgd") {
        v[i] -= lr * g_i;
      } else if (optimizer.kind == "momentum") {
        slot1[i] = optimizer.momentum * slot1[i] + g_i;
        v[i] -= lr * (optimizer.nesterov ? g_i + optimizer.momentum * slot1[i] : slot1[i]);
      } else {
        slot1[i] = optimizer.beta1 * slot1[i] + (1 - optimizer.beta1) * g_i;
        slot2[i] = optimizer.beta2 * slot2[i] + (1 - optimizer.beta2) * g_i * g_i;
        const double m_hat = slot1[i] / (1 - std::pow(optimizer.beta1, step));
        const double v_hat = slot2[i] / (1 - std::pow(optimizer.beta2, step));
        v[i] -= lr * m_hat / (std::sqrt(v_hat) + optimizer.epsilon);
      }
    }
    const auto got = session.read_variable("w")->to_vector<double>();
    for (size_t i = 0; i < 3; ++i) CHECK(got[i] == doctest::Approx(v[i]).epsilon(1e-12));
    CHECK(session.read_variable("optimizer/iterations")->to_vector<int64_t>() == std::vector<int64_t>{step});
  }
}

// On the CPU and on every backend under test, where the plain loop is the reference.
TEST_CASE("Optimizers.updates_match_plain_loops") {
  std::vector<graph::DeviceKind> kinds = {graph::DeviceKind::cpu};
  kinds.insert(kinds.end(), backends_under_test().begin(), backends_under_test().end());
  const char* ops_used[] = {"ApplyGradientDescent", "ApplyMomentum", "ApplyAdam", "AssignAdd", "NoOp"};
  for (graph::DeviceKind kind : kinds) {
    check_against_loop(ops::Optimizer::sgd(0.1), kind);
    check_against_loop(ops::Optimizer::momentum_sgd(0.1, 0.9), kind);
    check_against_loop(ops::Optimizer::momentum_sgd(0.1, 0.9, /*nesterov=*/true), kind);
    check_against_loop(ops::Optimizer::adam(0.3), kind);
    check_against_loop(ops::Optimizer::adamw(0.3, 0.1), kind);
    // SGDW: decoupled weight decay on plain and momentum SGD, and on Adam as on AdamW.
    for (ops::Optimizer decayed : {ops::Optimizer::sgd(0.1), ops::Optimizer::momentum_sgd(0.1, 0.9),
                                   ops::Optimizer::momentum_sgd(0.1, 0.9, /*nesterov=*/true), ops::Optimizer::adam(0.3)}) {
      decayed.weight_decay = 0.2;
      check_against_loop(decayed, kind);
    }
    for (const char* op : ops_used) (kind == graph::DeviceKind::cpu ? checked_ops() : conformance_checked(kind)).insert(op);
  }
}

// On the CPU and on every backend under test.
TEST_CASE("Kernels.Assign.writes_the_value_into_the_variable") {
  std::vector<graph::DeviceKind> kinds = {graph::DeviceKind::cpu};
  kinds.insert(kinds.end(), backends_under_test().begin(), backends_under_test().end());
  const std::vector<float> values = {1, -2, 3.5f, 0, 5, -6};
  for (graph::DeviceKind kind : kinds) {
    CAPTURE(graph::device_kind_name(kind));
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    auto w = ops::variable(b, "w", {2, 3}, ops::Initializer::ones());
    const graph::NodeId write = ops::assign(b, w, ops::constant<float>(b, {2, 3}, std::span<const float>(values)));
    REQUIRE(b.status().ok());
    runtime::Session session(g, ops::kernels(), {.threads = 2, .default_device = {kind, 0}});
    REQUIRE(session.run({}, {}, {write}).ok());
    CHECK(session.read_variable("w")->to_vector<float>() == values);
    // Several values are joined in order (sharded optimizer state's shares): 4 + 0 + 2 elements.
    const std::vector<float> first = {9, 8, 7, 6}, last = {5, 4};
    auto v = ops::variable(b, "v", {2, 3}, ops::Initializer::ones());
    const graph::NodeId join = ops::assign(b, v, {ops::constant<float>(b, {4}, std::span<const float>(first)),
                                                  ops::constant<float>(b, {0}, std::span<const float>()),
                                                  ops::constant<float>(b, {2}, std::span<const float>(last))});
    REQUIRE(b.status().ok());
    runtime::Session joined(g, ops::kernels(), {.threads = 2, .default_device = {kind, 0}});
    REQUIRE(joined.run({}, {}, {join}).ok());
    CHECK(joined.read_variable("v")->to_vector<float>() == std::vector<float>{9, 8, 7, 6, 5, 4});
    // The value must have the variable's dtype and shape; values, its element count.
    graph::Graph bad;
    graph::Builder c(bad, ops::registry());
    auto u = ops::variable(c, "u", {2, 3});
    (void)ops::assign(c, u, {ops::constant<float>(c, {4}, std::span<const float>(first)),
                             ops::constant<float>(c, {1}, std::span<const float>(last).first(1))});
    CHECK(c.status().message().find("the values hold 5 elements, the variable 6") != std::string::npos);
    (void)ops::assign(b, w, ops::constant<float>(b, {6}, std::span<const float>(values)));
    CHECK(b.status().message().find("the value must have the variable's shape") != std::string::npos);
    (kind == graph::DeviceKind::cpu ? checked_ops() : conformance_checked(kind)).insert("Assign");
  }
}

// Each update op alone, on variables of every dtype its schema accepts, against its formula in a plain
// loop (with the gate open, and closed: nothing changes); the state after the update is compared.
TEST_CASE("Kernels.updates.at_every_dtype") {
  runtime::Random rng(7);
  const TensorShape shape{5, 3};
  const int64_t n = shape.num_elements();
  const auto scalar = [](DType dtype, double value) { return make_tensor(dtype, {}, [&](int64_t) { return value; }); };
  const auto elementwise = [&](const Tensor& like, const std::function<double(int64_t)>& f) {
    return make_tensor(like.dtype(), like.shape(), f);
  };
  const double lr = 0.1;
  for (const bool open : {true, false}) {
    CAPTURE(open);
    const Tensor gate = Tensor::scalar<bool>(open);
    for (const double weight_decay : {0.0, 0.3}) {
      CAPTURE(weight_decay);
      const double decay = 1 - lr * weight_decay;
      check_op_at_every_dtype("ApplyGradientDescent", [&](DType dtype) {
        const Tensor v = random_of(rng, dtype, shape, -4, 4), g = random_of(rng, dtype, shape, -4, 4);
        const auto updated = [&](int64_t i) { return decay * element(v, i) - lr * element(g, i); };
        return OpCase{.inputs = {v, g, scalar(dtype, lr), gate},
                      .attrs = {{"weight_decay", weight_decay}},
                      .expected = {open ? elementwise(v, updated) : v},
                      .variables = 1};
      });
      for (const bool nesterov : {false, true}) {
        check_op_at_every_dtype("ApplyMomentum", [&](DType dtype) {
          const double momentum = 0.9;
          const Tensor v = random_of(rng, dtype, shape), a = random_of(rng, dtype, shape), g = random_of(rng, dtype, shape);
          std::vector<double> v2(static_cast<size_t>(n)), a2(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) {
            const auto k = static_cast<size_t>(i);
            a2[k] = momentum * element(a, i) + element(g, i);
            v2[k] = decay * element(v, i) - lr * (nesterov ? element(g, i) + momentum * a2[k] : a2[k]);
          }
          return OpCase{.inputs = {v, a, g, scalar(dtype, lr), gate},
                        .attrs = {{"momentum", momentum}, {"use_nesterov", nesterov}, {"weight_decay", weight_decay}},
                        .expected = {open ? elementwise(v, [&](int64_t i) { return v2[static_cast<size_t>(i)]; }) : v,
                                     open ? elementwise(a, [&](int64_t i) { return a2[static_cast<size_t>(i)]; }) : a},
                        .variables = 2};
        });
      }
    }
    check_op_at_every_dtype("ApplyAdam", [&](DType dtype) {
      const double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-7, weight_decay = 0.01;
      const int64_t done = 3;  // updates already applied: this is update 4
      const Tensor v = random_of(rng, dtype, shape), m = random_of(rng, dtype, shape), s = random_of(rng, dtype, shape, 0, 1);
      const Tensor g = random_of(rng, dtype, shape);
      std::vector<double> v2(static_cast<size_t>(n)), m2(static_cast<size_t>(n)), s2(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<size_t>(i);
        m2[k] = beta1 * element(m, i) + (1 - beta1) * element(g, i);
        s2[k] = beta2 * element(s, i) + (1 - beta2) * element(g, i) * element(g, i);
        const double m_hat = m2[k] / (1 - std::pow(beta1, done + 1)), s_hat = s2[k] / (1 - std::pow(beta2, done + 1));
        v2[k] = element(v, i) * (1 - lr * weight_decay) - lr * m_hat / (std::sqrt(s_hat) + epsilon);
      }
      return OpCase{.inputs = {v, m, s, g, scalar(dtype, lr), Tensor::scalar<int64_t>(done), gate},
                    .attrs = {{"beta1", beta1}, {"beta2", beta2}, {"epsilon", epsilon}, {"weight_decay", weight_decay}},
                    .expected = {open ? elementwise(v, [&](int64_t i) { return v2[static_cast<size_t>(i)]; }) : v,
                                 open ? elementwise(m, [&](int64_t i) { return m2[static_cast<size_t>(i)]; }) : m,
                                 open ? elementwise(s, [&](int64_t i) { return s2[static_cast<size_t>(i)]; }) : s},
                    .variables = 3};
    });
    check_op_at_every_dtype("AssignAdd", [&](DType dtype) {
      const Tensor v = random_of(rng, dtype, shape, -4, 4), d = random_of(rng, dtype, shape, -4, 4);
      return OpCase{.inputs = {v, d, gate},
                    .expected = {open ? elementwise(v, [&](int64_t i) { return element(v, i) + element(d, i); }) : v},
                    .variables = 1};
    });
  }
  // NoOp reads no tensor: it runs at every dtype alike.
  check_op_at_every_dtype("NoOp", [](DType) { return OpCase{}; });
  // One value, and shares of 9, 0 and 6 elements joined in order.
  check_op_at_every_dtype("Assign", [&](DType dtype) {
    const Tensor value = random_of(rng, dtype, shape, -4, 4);
    return OpCase{.inputs = {random_of(rng, dtype, shape, -4, 4), value}, .expected = {value}, .variables = 1};
  });
  check_op_at_every_dtype("Assign", [&](DType dtype) {
    const Tensor whole = random_of(rng, dtype, {n}, -4, 4);
    const auto part = [&](int64_t first, int64_t count) {
      return make_tensor(dtype, {count}, [&](int64_t i) { return element(whole, first + i); });
    };
    return OpCase{.inputs = {random_of(rng, dtype, shape, -4, 4), part(0, 9), part(9, 0), part(9, 6)},
                  .expected = {make_tensor(dtype, shape, [&](int64_t i) { return element(whole, i); })},
                  .variables = 1};
  });
}

// Decoupled weight decay skips the variables whose name holds an excluded part (Keras's
// exclude_from_weight_decay), and the exclusions travel with the other hyper-parameters.
TEST_CASE("Optimizers.weight_decay_skips_excluded_names") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto kernel = ops::variable(b, "dense/kernel", {2}, ops::Initializer::constant(1.0), DType::f64);
  auto gamma = ops::variable(b, "bn/gamma", {2}, ops::Initializer::constant(1.0), DType::f64);
  // A loss whose gradient is zero: only the decay moves the variables.
  auto loss = ops::mul(b, ops::scalar_of(b, 0.0, kernel), ops::reduce_sum(b, ops::add(b, kernel, gamma)));
  ops::Optimizer optimizer = ops::Optimizer::momentum_sgd(0.5, 0.9);
  optimizer.weight_decay = 0.1;
  optimizer.exclude_from_weight_decay = {"gamma", "beta"};
  auto train = ops::minimize(b, loss, optimizer);
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  runtime::Session session(g, ops::kernels(), {.threads = 1});
  for (int step = 0; step < 2; ++step) REQUIRE(session.run({}, {}, {train->train}).ok());
  const double decay = 1 - 0.5 * 0.1;  // 1 - lr * weight_decay, each step
  CHECK(session.read_variable("dense/kernel")->to_vector<double>() == std::vector<double>(2, decay * decay));
  CHECK(session.read_variable("bn/gamma")->to_vector<double>() == std::vector<double>(2, 1.0));

  const graph::AttrMap stored = ops::optimizer_hyper_parameters(optimizer);
  auto restored = ops::optimizer_from_hyper_parameters("momentum", stored);
  REQUIRE(restored.ok());
  CHECK(restored->weight_decay == 0.1);
  CHECK(restored->exclude_from_weight_decay == std::vector<std::string>{"gamma", "beta"});
  graph::AttrMap bad = stored;
  bad.set("exclude_from_weight_decay", std::string("gamma"));
  CHECK(ops::optimizer_from_hyper_parameters("momentum", bad).status().message() ==
        "optimizer hyper-parameter 'exclude_from_weight_decay' must be a list of strings");
  bad.set("exclude_from_weight_decay", std::vector<std::string>{"gamma", ""});
  CHECK(ops::optimizer_from_hyper_parameters("momentum", bad).status().message().find("an empty name") != std::string::npos);
  bad = stored;
  bad.set("weight_decay", -1.0);
  CHECK(ops::optimizer_from_hyper_parameters("momentum", bad).status().message() == "weight decay must be in [0, 1e6)");
}

TEST_CASE("Kernels.Variable.shard_of_holds_a_flat_share") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto shard = [&](graph::Shape shape, graph::Shape whole) {
    return b.add_value({.op = "Variable", .attrs = {{"shape", std::move(shape)}, {"shard_of", std::move(whole)}}, .name = "s"});
  };
  CHECK(shard({2}, {3, 2}).valid());
  CHECK(shard({0}, {2}).valid());  // an empty share
  CHECK_FALSE(shard({7}, {3, 2}).valid());
  CHECK(b.status().message().find("a shard of [3,2] must be a list of at most its 6 elements, not [7]") != std::string::npos);
}

TEST_CASE("Kernels.Variable.parts_start_as_the_rows_of_the_whole") {
  // A Glorot-initialised [5, 3] variable and its parts [0, 2) and [2, 5) along axis 0: the parts'
  // first values are the whole's rows, so a partitioned variable starts where the whole would.
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto variable = [&](const std::string& name, graph::Shape shape, std::optional<int64_t> offset) {
    graph::AttrMap attrs = {{"shape", std::move(shape)}, {"initializer", std::string("glorot_uniform")}, {"seed", int64_t{7}}};
    if (offset) {
      attrs.set("partition_of", graph::Shape{5, 3});
      attrs.set("partition_offset", *offset);
    }
    return b.add_value({.op = "Variable", .attrs = std::move(attrs), .name = name});
  };
  const graph::ValueRef whole = variable("whole", {5, 3}, std::nullopt);
  const graph::ValueRef first = variable("whole/part_0", {2, 3}, 0);
  const graph::ValueRef second = variable("whole/part_1", {3, 3}, 2);
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels(), {.threads = 1});
  auto values = session.run({}, {whole, first, second});
  REQUIRE(values.ok());
  const std::vector<float> rows = (*values)[0].to_vector<float>();
  std::vector<float> joined = (*values)[1].to_vector<float>();
  const std::vector<float> rest = (*values)[2].to_vector<float>();
  joined.insert(joined.end(), rest.begin(), rest.end());
  CHECK(joined == rows);
  CHECK(std::set<float>(rows.begin(), rows.end()).size() == rows.size());  // drawn, not zeros

  SUBCASE("rows outside the whole are refused") {
    variable("bad", {3, 3}, 3);
    CHECK(b.status().message().find("3 rows from row 3 are outside [5,3]") != std::string::npos);
  }
  SUBCASE("an offset past any row is refused") {
    variable("bad", {2, 3}, std::numeric_limits<int64_t>::max());
    CHECK(b.status().message().find("2 rows from row 9223372036854775807 are outside [5,3]") != std::string::npos);
  }
  SUBCASE("another row shape is refused") {
    variable("bad", {2, 4}, 0);
    CHECK(b.status().message().find("a part [2,4] of [5,3] along axis 0 keeps its rank and its other dimensions") != std::string::npos);
  }
}

TEST_CASE("Optimizers.global_norm_clipping") {
  // The first gradients have norm sqrt(4 + 25 + 6.25) = 5.94: a clip of 1 scales them, one of 100 does not.
  for (double clip : {1.0, 100.0}) {
    ops::Optimizer sgd = ops::Optimizer::sgd(0.1);
    sgd.clip_global_norm = clip;
    check_against_loop(sgd, graph::DeviceKind::cpu);
    ops::Optimizer adam = ops::Optimizer::adam(0.1);
    adam.clip_global_norm = clip;
    check_against_loop(adam, graph::DeviceKind::cpu);
  }
}

TEST_CASE("Optimizers.updates_run_after_every_reader") {
  // The loss reads w through an Identity (which shares w's buffer): the update must still wait, so the
  // fetched loss is the one of the old w in every one of many parallel runs.
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto w = ops::variable(b, "w", {4096}, ops::Initializer::ones());
  auto loss = ops::reduce_sum(b, ops::square(b, ops::identity(b, w)));
  auto train = ops::minimize(b, loss, ops::Optimizer::sgd(0.25));
  REQUIRE(train.ok());
  runtime::Session session(g, ops::kernels(), {.threads = 2});
  double expected = 4096;  // each step halves w, so the loss falls by 4
  for (int step = 0; step < 8; ++step) {
    auto out = session.run({}, {loss}, {train->train});
    REQUIRE(out.ok());
    CHECK((*out)[0].values<float>()[0] == doctest::Approx(expected));
    expected /= 4;
  }
}

// The set of nodes `node` waits for, through data and control edges.
std::set<graph::NodeId> ancestors(const graph::Graph& g, graph::NodeId node) {
  std::set<graph::NodeId> seen;
  std::vector<graph::NodeId> stack = {node};
  while (!stack.empty()) {
    const graph::Node& n = g.node(stack.back());
    stack.pop_back();
    std::vector<graph::NodeId> before = n.control_inputs;
    for (graph::ValueRef input : n.inputs) before.push_back(input.node);
    for (graph::NodeId id : before) {
      if (seen.insert(id).second) stack.push_back(id);
    }
  }
  return seen;
}

TEST_CASE("Optimizers.updates_wait_only_for_readers_of_their_variable") {
  // Two layers: the update of the last one waits for what reads its weights (the forward product and
  // the product that passes the gradient back through them, one of them through a Reshape) but not
  // for the first layer's gradient, so it may overlap the rest of the backward pass.
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 3});
  auto w1 = ops::variable(b, "w1", {3, 4}, ops::Initializer::glorot_uniform());
  auto w2 = ops::variable(b, "w2", {8}, ops::Initializer::glorot_uniform());
  auto hidden = ops::relu(b, ops::matmul(b, x, w1));
  auto loss = ops::reduce_sum(b, ops::square(b, ops::matmul(b, hidden, ops::reshape(b, w2, {4, 2}))));
  auto train = ops::minimize(b, loss, ops::Optimizer::sgd(0.1));
  REQUIRE(train.ok());
  graph::NodeId update_w2 = graph::kInvalidNode;
  for (graph::NodeId update : g.node(train->train).control_inputs) {
    if (g.node(update).inputs.size() > 0 && g.node(update).inputs[0] == w2) update_w2 = update;
  }
  REQUIRE(update_w2 != graph::kInvalidNode);
  const std::set<graph::NodeId> waits_for = ancestors(g, update_w2);
  std::set<std::string> products;
  for (graph::NodeId id : waits_for) {
    if (g.node(id).op == "MatMul") products.insert(g.node(id).name);
  }
  // Both forward products (the first feeds the gradient), the gradient's own product and the one
  // that passes the gradient back through w2 to `hidden` (it reads w2); not w1's gradient product.
  CHECK(products.size() == 4u);
  const graph::ValueRef gradient_w1 = train->variables_and_gradients[0].second;
  REQUIRE(train->variables_and_gradients[0].first == w1);
  CHECK(waits_for.count(gradient_w1.node) == 0u);
}

TEST_CASE("Optimizers.bad_configurations_are_errors") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {2});
  auto loss = ops::reduce_sum(b, x);
  CHECK(ops::minimize(b, loss, ops::Optimizer::sgd(0.1)).status().message() ==
        "minimize: the graph has no trainable variables");
  (void)ops::variable(b, "w", {2});
  CHECK(ops::minimize(b, loss, {"adagrad", 0.1}).status().message() ==
        "optimizer 'adagrad' is not known (sgd, momentum, adam, adamw)");
  CHECK(ops::minimize(b, loss, ops::Optimizer::sgd(-1)).status().message() == "learning rate must be positive");
  CHECK(ops::minimize(b, loss, ops::Optimizer::momentum_sgd(0.1, 1.5)).status().message() ==
        "momentum must be in [0, 1)");
  ops::Optimizer adam = ops::Optimizer::adam(0.1);
  adam.beta2 = 1.0;
  CHECK(ops::minimize(b, loss, adam).status().message() == "adam's beta1 and beta2 must be in [0, 1)");
  CHECK(ops::minimize(b, loss, ops::Optimizer::adamw(0.1, -1)).status().message() == "weight decay must be in [0, 1e6)");
}

TEST_CASE("Optimizers.a_small_classifier_learns") {
  // Two Gaussian blobs in 4-D; a 4-8-2 MLP with momentum reaches a low loss.
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 11);
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 4});
  auto labels = ops::placeholder(b, "labels", DType::i32, {-1});
  auto w1 = ops::variable(b, "w1", {4, 8}, ops::Initializer::glorot_uniform());
  auto w2 = ops::variable(b, "w2", {8, 2}, ops::Initializer::glorot_uniform());
  auto bias = ops::variable(b, "b", {2});
  auto logits = ops::bias_add(b, ops::matmul(b, ops::relu(b, ops::matmul(b, x, w1)), w2), bias);
  auto loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, logits, labels).loss);
  auto train = ops::minimize(b, loss, ops::Optimizer::momentum_sgd(0.05, 0.9));
  REQUIRE(train.ok());
  runtime::Random rng(5);
  std::vector<float> points;
  std::vector<int32_t> classes;
  for (int i = 0; i < 64; ++i) {
    const int32_t c = i % 2;
    classes.push_back(c);
    for (int d = 0; d < 4; ++d) points.push_back(static_cast<float>((c ? 1.0 : -1.0) + 0.5 * rng.normal()));
  }
  const runtime::Feeds feeds = {{"x", Tensor::from<float>({64, 4}, std::span<const float>(points))},
                                {"labels", Tensor::from<int32_t>({64}, std::span<const int32_t>(classes))}};
  runtime::Session session(g, ops::kernels());
  const float first = (*session.run(feeds, {loss}))[0].values<float>()[0];
  float last = first;
  for (int step = 0; step < 100; ++step) {
    auto out = session.run(feeds, {loss}, {train->train});
    REQUIRE(out.ok());
    last = (*out)[0].values<float>()[0];
  }
  CHECK(first > 0.3f);
  CHECK(last < 0.1f * first);
}

}  // namespace
}  // namespace mirra::test
