// prune: removes the nodes that no step of a training program needs (the chains a fusion replaced,
// what a rewrite left unread), so that a strategy never clones them and plans, memory estimates and
// printed graphs hold only what runs. Every variable stays, needed or not: it is the model's state,
// which checkpoints and model files keep.
#pragma once

#include <span>

#include "strategies/strategy.h"

namespace mirra::strategies {

// Keeps what the signature's targets and values need (train, accumulate, loss, correct count,
// learning rate, the batch placeholders), the step state, the values reported besides them, the variables with their gradients and the
// gradients' seed; moves every reference the program holds along with its node. `replaced`: variables
// a rewrite replaced (cut into parts), which go too.
void prune(TrainingProgram& program, std::span<const graph::NodeId> replaced = {});

}  // namespace mirra::strategies
