#pragma once
// Python's math module on numbers: one table for __init__'s evaluator (construct.cpp) and for the math calls of
// constants that lowering folds (exprs.cpp), so both read the same functions with Python's result types and errors.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::script {

struct MathNumber {
  enum class Kind { Int, Float, Bool } kind = Kind::Float;
  int64_t i = 0;
  double f = 0;
  static MathNumber of_int(int64_t v) { return {Kind::Int, v, double(v)}; }
  static MathNumber of_float(double v) { return {Kind::Float, 0, v}; }
  static MathNumber of_bool(bool v) { return {Kind::Bool, v, double(v)}; }
};

// math.NAME(args...); null when kiln has no such function. `error` receives Python's message (a ValueError's
// "math domain error", a TypeError's argument count) and must not return.
std::optional<MathNumber> python_math(const std::string& name, const std::vector<MathNumber>& args,
                                      const std::function<void(const std::string&)>& error);

}  // namespace kiln::script
