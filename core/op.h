#pragma once
// OpId: one enumerator per row of ops.def, with the row's name, kind and dtype rule.
#include <cstdint>
#include <string_view>

namespace kiln {

enum class OpId : uint16_t {
#define KILN_UNARY(Id, name, rule, expr) Id,
#define KILN_BINARY(Id, name, rule, expr) Id,
#define KILN_REDUCE(Id, name, ...) Id,
#define KILN_OP(Id, name, kind) Id,
#include "core/ops.def"
};

constexpr int kNumOps = 0
#define KILN_UNARY(Id, name, rule, expr) +1
#define KILN_BINARY(Id, name, rule, expr) +1
#define KILN_REDUCE(Id, name, ...) +1
#define KILN_OP(Id, name, kind) +1
#include "core/ops.def"
    ;

enum class OpKind : uint8_t { Unary, Binary, Reduce, View, Other };
enum class DTypeRule : uint8_t { Keep, Float, Promote, Compare, Logical, None };

struct OpInfo {
  std::string_view name;     // "add"
  OpKind kind;
  DTypeRule rule;
  std::string_view expr;     // the scalar expression, for code generators (a reduction: its fold); empty for the rest
  std::string_view init;     // a reduction's start value (an expression in its accumulator type A)
};

// core/op_facts.def's row of an op: what autograd and the JIT's partitioner need to know of it.
enum class OpCost : uint8_t { Cheap, Math, Saved };
// A binary op's unit u: x op u == x (right), and u op x == x too when `left`.
struct OpUnit {
  bool exists = false, left = false;
  int value = 0;
};
struct OpFacts {
  OpId id;
  bool differentiable;
  // bit i < 8: the derivative reads input i's values (inputs past 7 share bit 7); bit 8 + k: output k's
  uint16_t grad_reads;
  OpCost cost;
  OpUnit unit;
  bool derivative_reads(size_t input) const { return grad_reads >> (input < 7 ? input : 7) & 1; }
  bool derivative_reads_output(size_t k) const { return k < 8 && (grad_reads >> (8 + k) & 1); }
};

const OpInfo& op_info(OpId op);
const OpFacts& op_facts(OpId op);
inline std::string_view op_name(OpId op) { return op_info(op).name; }
// Looks a name up in the table; returns false when no row has it.
bool op_from_name(std::string_view name, OpId* out);

}  // namespace kiln
