// Writes a TorchScript module x -> relu(flatten(x) W^T), W [outputs, inputs],
// compiled from TorchScript source in C++ (no Python needed): a stand-in for
// a user's torch.jit.save'd backbone.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace hedgedb {
namespace encoders {

inline void WriteScriptModule(const std::string& path, int64_t outputs = 6, int64_t inputs = 4) {
  torch::jit::Module module("Backbone");
  // requires_grad as a Python-saved nn.Parameter has it; the backbone keeps
  // each script parameter's flag, so frozen script layers stay frozen.
  module.register_parameter("weight", torch::randn({outputs, inputs}).requires_grad_(true),
                            /*is_buffer=*/false);
  module.define(R"JIT(
def forward(self, x):
    return torch.relu(torch.matmul(x.flatten(1), self.weight.t()))
)JIT");
  module.save(path);
}

}  // namespace encoders
}  // namespace hedgedb
