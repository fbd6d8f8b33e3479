#pragma once
// The script lexer: Python 3.11's tokens. Indentation becomes INDENT/DEDENT tokens; newlines inside
// (), [] and {} and after a backslash are joined, as Python does. An f-string becomes FStringStart,
// its literal parts (FStringMiddle, decoded) and the tokens of each replacement field between '{' and
// '}' (with '!' and ':' before a conversion and a format spec), then FStringEnd, as Python 3.12's
// tokenizer does: the parser reads the fields as expressions without lexing twice.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "script_frontend/source.h"

namespace kiln::script {

enum class Tok : uint8_t {
  Name,
  Int,  // big when the value does not fit in int64 (text holds the spelling)
  Float,
  Imag,  // 1j, 1.5e3j: float_value
  String,  // bytes for b"..."
  FStringStart,
  FStringMiddle,
  FStringEnd,
  Op,
  Newline,
  Indent,
  Dedent,
  End
};

struct Token {
  Tok kind;
  std::string text;  // the name, the operator, the string's decoded value, the number's spelling
  SourceLoc loc;
  int64_t int_value = 0;
  double float_value = 0;
  size_t pos = 0;  // byte offset of the token in the source (an f-string's `{x=}` keeps its spelling)
  bool bytes = false;  // String
  bool big = false;    // Int
};

// Raises kiln::Error in the source error format at the first bad character or indentation.
std::vector<Token> lex(const Source& src);

}  // namespace kiln::script
