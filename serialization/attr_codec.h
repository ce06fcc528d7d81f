// Node attributes between graph::AttrMap and the FlatBuffers Attr union. Reading checks each value
// the way tensors and shapes are checked (tensor_codec.h) and rejects repeated names.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <string_view>

#include "graph/attr.h"
#include "graph/status.h"
#include "serialization/mirra_generated.h"

namespace mirra::serialization {

using FbAttrs = flatbuffers::Vector<flatbuffers::Offset<fb::Attr>>;

flatbuffers::Offset<FbAttrs> write_attrs(flatbuffers::FlatBufferBuilder& fbb, const graph::AttrMap& attrs);
// `what` names the owner ("node 4 'dense1/matmul'") in errors.
graph::Expected<graph::AttrMap> read_attrs(const FbAttrs* attrs, std::string_view what);

}  // namespace mirra::serialization
