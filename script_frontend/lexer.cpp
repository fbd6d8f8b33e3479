#include "script_frontend/lexer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

namespace kiln::script {

namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Longest first, so "**=" wins over "**" and "*".
constexpr std::string_view kOps[] = {"**=", "//=", ">>=", "<<=", "...", "->", "**", "//", "==", "!=", "<=", ">=",
                                     "+=",  "-=",  "*=",  "/=",  "%=",  "@=", "&=", "|=", "^=", ":=", "<<", ">>",
                                     "+",   "-",   "*",   "/",   "%",   "@",  "<",  ">",  "=",  "(",  ")",  "[",
                                     "]",   "{",   "}",   ",",   ":",   ".",  ";",  "~",  "&",  "|",  "^"};

class Lexer {
 public:
  explicit Lexer(const Source& src) : src_(src), s_(src.text) {}

  std::vector<Token> run() {
    indents_.push_back(0);
    bool at_line_start = true;
    while (pos_ < s_.size()) {
      if (at_line_start && depth_ == 0) {
        if (!indentation()) continue;  // a blank or comment-only line
        at_line_start = false;
      }
      char c = s_[pos_];
      if (c == '\n') {
        if (depth_ == 0) {
          push(Tok::Newline, "\n", here());
          at_line_start = true;
        }
        advance();
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        advance();
        continue;
      }
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') advance();
        continue;
      }
      if (c == '\\') {
        SourceLoc at = here();
        advance();
        if (pos_ < s_.size() && s_[pos_] == '\r') advance();
        if (pos_ >= s_.size() || s_[pos_] != '\n') src_.fail(at, "unexpected character after line continuation");
        advance();
        continue;
      }
      if (is_name_start(c) || static_cast<unsigned char>(c) >= 0x80) {
        if (static_cast<unsigned char>(c) >= 0x80) src_.fail(here(), "non-ASCII characters are not supported in kiln script");
        name_or_string();
        continue;
      }
      if (is_digit(c) || (c == '.' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1]))) {
        number();
        continue;
      }
      if (c == '"' || c == '\'') {
        string(here());
        continue;
      }
      op();
    }
    if (depth_ > 0) src_.fail(open_.back(), fmt::format("'{}' was never closed", open_char_.back()));
    if (!tokens_.empty() && tokens_.back().kind != Tok::Newline) push(Tok::Newline, "\n", here());
    while (indents_.size() > 1) {
      indents_.pop_back();
      push(Tok::Dedent, "", here());
    }
    push(Tok::End, "", here());
    return std::move(tokens_);
  }

 private:
  SourceLoc here() const { return {line_, col_}; }
  void advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void push(Tok k, std::string text, SourceLoc loc) { tokens_.push_back(Token{k, std::move(text), loc}); }

  // Measures the indentation of a new line; returns false for blank and comment-only lines.
  bool indentation() {
    int width = 0;
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\f')) {
      width = s_[pos_] == '\t' ? (width / 8 + 1) * 8 : width + 1;
      advance();
    }
    if (pos_ < s_.size() && s_[pos_] == '\r') advance();
    if (pos_ >= s_.size()) return false;
    if (s_[pos_] == '\n') {
      advance();
      return false;
    }
    if (s_[pos_] == '#') {
      while (pos_ < s_.size() && s_[pos_] != '\n') advance();
      return false;
    }
    if (width > indents_.back()) {
      indents_.push_back(width);
      push(Tok::Indent, "", here());
    } else {
      while (width < indents_.back()) {
        indents_.pop_back();
        push(Tok::Dedent, "", here());
      }
      if (width != indents_.back()) src_.fail(here(), "unindent does not match any outer indentation level");
    }
    return true;
  }

  void name_or_string() {
    SourceLoc at = here();
    size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) advance();
    std::string word(s_.substr(start, pos_ - start));
    if (pos_ < s_.size() && (s_[pos_] == '"' || s_[pos_] == '\'') && word.size() <= 2) {
      for (char p : word)
        if (p == 'f' || p == 'F') src_.fail(at, "f-strings are not supported in kiln script");
        else if (p == 'b' || p == 'B') src_.fail(at, "bytes literals are not supported in kiln script");
        else if (p != 'r' && p != 'R' && p != 'u' && p != 'U') src_.fail(at, "unknown string prefix '" + word + "'");
      string(at, word.find_first_of("rR") != std::string::npos);
      return;
    }
    push(Tok::Name, std::move(word), at);
  }

  void number() {
    SourceLoc at = here();
    size_t start = pos_;
    bool is_float = false;
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && std::string_view("xXoObB").find(s_[pos_ + 1]) != std::string_view::npos) {
      int base = (s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'X') ? 16 : (s_[pos_ + 1] == 'o' || s_[pos_ + 1] == 'O') ? 8 : 2;
      advance();
      advance();
      size_t digits = pos_;
      while (pos_ < s_.size() && (std::isxdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) advance();
      std::string text;
      for (size_t i = digits; i < pos_; ++i)
        if (s_[i] != '_') text += s_[i];
      char* end = nullptr;
      errno = 0;
      unsigned long long v = text.empty() ? 0 : std::strtoull(text.c_str(), &end, base);
      if (text.empty() || *end != '\0' || errno == ERANGE || v > uint64_t(INT64_MAX))
        src_.fail(at, "invalid integer literal '" + std::string(s_.substr(start, pos_ - start)) + "'");
      Token t{Tok::Int, std::string(s_.substr(start, pos_ - start)), at};
      t.int_value = int64_t(v);
      tokens_.push_back(std::move(t));
      return;
    }
    while (pos_ < s_.size() && (is_digit(s_[pos_]) || s_[pos_] == '_')) advance();
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_float = true;
      advance();
      while (pos_ < s_.size() && (is_digit(s_[pos_]) || s_[pos_] == '_')) advance();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_float = true;
      advance();
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) advance();
      if (pos_ >= s_.size() || !is_digit(s_[pos_])) src_.fail(at, "invalid float literal: the exponent has no digits");
      while (pos_ < s_.size() && is_digit(s_[pos_])) advance();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'j' || s_[pos_] == 'J')) src_.fail(at, "complex numbers are not supported in kiln script");
    if (pos_ < s_.size() && is_name_start(s_[pos_])) src_.fail(here(), "invalid character in a number literal");
    std::string text;
    for (size_t i = start; i < pos_; ++i)
      if (s_[i] != '_') text += s_[i];
    Token t{is_float ? Tok::Float : Tok::Int, std::string(s_.substr(start, pos_ - start)), at};
    errno = 0;
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
      if (errno == ERANGE || v > uint64_t(INT64_MAX)) src_.fail(at, "integer literal " + text + " does not fit in int64");
      if (text.size() > 1 && text[0] == '0' && v != 0)
        src_.fail(at, "leading zeros in a decimal integer literal are not allowed (use 0o for octal)");
      t.int_value = int64_t(v);
    }
    tokens_.push_back(std::move(t));
  }

  void string(SourceLoc at, bool raw = false) {
    char q = s_[pos_];
    bool triple = pos_ + 2 < s_.size() && s_[pos_ + 1] == q && s_[pos_ + 2] == q;
    for (int i = 0; i < (triple ? 3 : 1); ++i) advance();
    std::string value;
    for (;;) {
      if (pos_ >= s_.size()) src_.fail(at, triple ? "unterminated triple-quoted string" : "unterminated string literal");
      char c = s_[pos_];
      if (!triple && c == '\n') src_.fail(at, "unterminated string literal");
      if (c == q && (!triple || (pos_ + 2 < s_.size() && s_[pos_ + 1] == q && s_[pos_ + 2] == q))) {
        for (int i = 0; i < (triple ? 3 : 1); ++i) advance();
        break;
      }
      if (c == '\\' && pos_ + 1 < s_.size()) {
        advance();
        char e = s_[pos_];
        advance();
        if (raw) {
          value += '\\';
          value += e;
          continue;
        }
        switch (e) {
          case 'n': value += '\n'; break;
          case 't': value += '\t'; break;
          case 'r': value += '\r'; break;
          case '0': value += '\0'; break;
          case '\n': break;
          case '\\': value += '\\'; break;
          case '\'': value += '\''; break;
          case '"': value += '"'; break;
          default:
            value += '\\';
            value += e;
        }
        continue;
      }
      value += c;
      advance();
    }
    Token t{Tok::String, std::move(value), at};
    tokens_.push_back(std::move(t));
  }

  void op() {
    SourceLoc at = here();
    for (std::string_view o : kOps) {
      if (s_.substr(pos_, o.size()) != o) continue;
      for (size_t i = 0; i < o.size(); ++i) advance();
      if (o == "(" || o == "[" || o == "{") {
        ++depth_;
        open_.push_back(at);
        open_char_.push_back(o[0]);
      } else if (o == ")" || o == "]" || o == "}") {
        if (depth_ == 0) src_.fail(at, fmt::format("unmatched '{}'", o));
        char want = open_char_.back() == '(' ? ')' : open_char_.back() == '[' ? ']' : '}';
        if (o[0] != want)
          src_.fail(at, fmt::format("closing '{}' does not match the opening '{}' at line {}", o, open_char_.back(),
                                    open_.back().line));
        --depth_;
        open_.pop_back();
        open_char_.pop_back();
      }
      push(Tok::Op, std::string(o), at);
      return;
    }
    char c = s_[pos_];
    if (c == '$' || c == '?' || c == '!' || c == '`')
      src_.fail(at, fmt::format("invalid character '{}' in kiln script", c));
    src_.fail(at, fmt::format("invalid character (byte 0x{:02x}) in kiln script", static_cast<unsigned char>(c)));
  }

  const Source& src_;
  std::string_view s_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
  int depth_ = 0;
  std::vector<SourceLoc> open_;
  std::vector<char> open_char_;
  std::vector<int> indents_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const Source& src) { return Lexer(src).run(); }

}  // namespace kiln::script
