// minimize(b, loss, optimizer): the gradients of loss for every trainable variable, and one update op
// per variable, grouped under a NoOp target named "train". Momentum slots are non-trainable variables
// created beside the variable they belong to ("<variable>/momentum"). The learning rate is a
// non-trainable scalar variable ("optimizer/learning_rate"), so a schedule can change it between steps.
//
//   auto train = ops::minimize(b, loss, ops::Optimizer::momentum(0.05, 0.9));
//   session.run(feeds, {}, {train->train});
//
// ENSURES: each update runs after every node that reads its variable (control edges), so a step
// reads the old values everywhere and writes the new ones once.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

struct Optimizer {
  std::string kind = "sgd";  // sgd or momentum
  double learning_rate = 0.01;
  double momentum = 0.0;
  bool nesterov = false;

  static Optimizer sgd(double learning_rate) { return {"sgd", learning_rate}; }
  static Optimizer momentum_sgd(double learning_rate, double momentum, bool nesterov = false) {
    return {"momentum", learning_rate, momentum, nesterov};
  }
};

struct TrainOp {
  graph::NodeId train = graph::kInvalidNode;                          // run it as a target
  std::vector<std::pair<graph::ValueRef, graph::ValueRef>> variables_and_gradients;
  graph::ValueRef learning_rate;
};

graph::Expected<TrainOp> minimize(graph::Builder& b, graph::ValueRef loss, const Optimizer& optimizer);

}  // namespace mirra::ops
