#pragma once
// The script lexer: Python's tokens for the kiln script subset. Indentation becomes INDENT/DEDENT
// tokens; newlines inside (), [] and {} and after a backslash are joined, as Python does.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "script_frontend/source.h"

namespace kiln::script {

enum class Tok : uint8_t { Name, Int, Float, String, Op, Newline, Indent, Dedent, End };

struct Token {
  Tok kind;
  std::string text;  // the name, the operator, the string's decoded value, the number's spelling
  SourceLoc loc;
  int64_t int_value = 0;
  double float_value = 0;
};

// Raises kiln::Error in the source error format at the first bad character or indentation.
std::vector<Token> lex(const Source& src);

}  // namespace kiln::script
