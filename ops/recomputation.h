// Recomputation (activation checkpointing: TensorFlow's recompute_grad, PyTorch's checkpoint): the
// activations of chosen name scopes are not kept from the forward pass to the backward pass but
// computed again there. recompute_scopes rewires a graph whose gradients are built: every gradient
// node that reads a value computed inside a scope reads instead a copy of that computation, whose
// first nodes run only once the backward pass has reached the scope (control edges from the
// gradients flowing into it). The forward values then die as soon as the forward pass is done with
// them. Every copy computes the very bits of its original (dropout draws by example key), so a step
// computes the same numbers with it or without it, holding less memory and doing more work.
//
// minimize() applies it between building the gradients and the updates (MinimizeOptions::recompute),
// so the updates are ordered after the copies that read their variables.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

// A name scope whose activations are recomputed in the backward pass (TensorFlow's recompute_grad
// around a function): the scope `name` opened like Builder::scope, marked in the graph by a NoOp
// called "recompute" inside it, so the mark travels with the model file. recompute_scopes_of always
// includes the marked scopes, whatever `training.recompute` adds.
//
//   { auto block = ops::recompute_scope(b, "block3"); x = ...; }
[[nodiscard]] graph::Builder::ScopeGuard recompute_scope(graph::Builder& b, std::string_view name);

// What `training.recompute` adds to the scopes the model marks: nothing; every name scope called
// block<N> (the GPT's and the ResNets' blocks), each recomputed apart from its input, which is kept;
// or all: the blocks and every other scope beside them (a GPT's final layer normalisation, a ResNet's
// stem and head), so that only the values passed between those parts are kept.
enum class Recompute { none, blocks, all };
graph::Expected<Recompute> parse_recompute(std::string_view name);
std::string_view recompute_name(Recompute mode);

// The scope prefixes ("gpt/block3/") recomputed in `g`, a graph without its gradients yet: those the
// model marks, and those `mode` adds.
std::vector<std::string> recompute_scopes_of(const graph::Graph& g, Recompute mode);

// Rewires the gradient nodes of `b`'s graph (those from `first_gradient` on: gradients() adds them
// after the forward pass's) to copies of the computations of each scope prefix. Variables,
// placeholders, constants and stateful ops are never copied. Returns how many nodes were copied.
graph::Expected<size_t> recompute_scopes(graph::Builder& b, std::span<const std::string> scopes, graph::NodeId first_gradient);

}  // namespace mirra::ops
