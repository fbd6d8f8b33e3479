#pragma once
// A fusion group lowered to what the x86 kernel emitter needs: a topologically ordered list of values
// (inputs, scalar constants, elementwise ops), the elementwise outputs and at most one trailing
// reduction. Every value is computed in one float type (f32 or f64); bool values are 0/1 in it. An f32
// group may read and write bf16 tensors (autocast's chains, alone or mixed with f32): loaded into f32
// registers exactly, rounded to nearest even once where a value is stored, as PyTorch's inductor does
// (eager kiln, like eager PyTorch, rounds after every op instead).
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/op.h"
#include "core/shape.h"

namespace kiln::ir {
class Graph;
}

namespace kiln::x86::detail {

struct PValue {
  enum Kind : uint8_t { Input, Const, Node } kind = Input;
  int input = -1;        // Input: the group input index
  double cval = 0;       // Const
  OpId op = OpId::Add;   // Node: a Unary or Binary row, or Where
  std::vector<int> args; // Node: value indices
  bool is_bool = false;
  bool to_bf16 = false;  // Node: a cast (OpId::Cast) to bf16, which rounds; a cast to f32 is the value itself
  uint64_t deps = 0;     // bit k: depends on input k (inputs past 63 share bit 63)
};

struct Program {
  bool f64 = false;
  std::vector<DType> input_dtypes;
  std::vector<PValue> vals;
  std::vector<int> outputs;        // elementwise outputs (value indices), in group output order
  std::vector<DType> output_dtypes;  // per entry of outputs: the compute type, bool or bf16
  // For each group output: its index in `outputs`, or -1 for the reduction's result.
  std::vector<int> out_slot;
  // The trailing reduction, when red_val >= 0.
  int red_val = -1;
  OpId red_op = OpId::Sum;
  Shape red_dims;                  // as given (empty = all)
  bool red_keepdim = false;
  DType red_dtype = DType::Float32;  // the reduction result's stored type: the compute type or bf16
  int num_ops = 0;                 // elementwise nodes, for the name
  DType compute() const { return f64 ? DType::Float64 : DType::Float32; }
};

// The type a group value of dtype `stored` takes in vector registers: bf16 is held as f32.
inline DType register_dtype(DType stored) { return stored == DType::BFloat16 ? DType::Float32 : stored; }

// Raises kiln::Error saying why the group cannot be lowered.
Program lower(const ir::Graph& group);

}  // namespace kiln::x86::detail
