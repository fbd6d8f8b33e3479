#include "script_frontend/lexer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

namespace kiln::script {

namespace {

// Bytes of UTF-8 sequences are name characters: Python's identifiers may be non-ASCII. They are kept
// as written; Python also NFKC-normalizes them (`ｗｉｄｔｈ` is `width`), which kiln does not.
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Longest first, so "**=" wins over "**" and "*".
constexpr std::string_view kOps[] = {"**=", "//=", ">>=", "<<=", "...", "->", "**", "//", "==", "!=", "<=", ">=",
                                     "+=",  "-=",  "*=",  "/=",  "%=",  "@=", "&=", "|=", "^=", ":=", "<<", ">>",
                                     "+",   "-",   "*",   "/",   "%",   "@",  "<",  ">",  "=",  "(",  ")",  "[",
                                     "]",   "{",   "}",   ",",   ":",   ".",  ";",  "~",  "&",  "|",  "^"};

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The words Python lets follow a number without a space (`1if x else 2`).
bool keyword_follows(std::string_view rest) {
  for (std::string_view k : {"and", "else", "for", "if", "in", "is", "not", "or"})
    if (rest.substr(0, k.size()) == k) return true;
  return false;
}

class Lexer {
 public:
  explicit Lexer(const Source& src) : src_(src), s_(src.text) {}

  std::vector<Token> run() {
    indents_.push_back(0);
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // a UTF-8 byte order mark
    bool at_line_start = true;
    while (pos_ < s_.size()) {
      if (at_line_start && depth_ == 0) {
        if (!indentation()) continue;  // a blank or comment-only line
        at_line_start = false;
      }
      if (s_[pos_] == '\n') {
        if (depth_ == 0) {
          push(Tok::Newline, "\n", here());
          at_line_start = true;
        }
        advance();
        continue;
      }
      token();
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
  void advance(size_t n) {
    for (size_t i = 0; i < n; ++i) advance();
  }
  Token& push(Tok k, std::string text, SourceLoc loc, size_t at = size_t(-1)) {
    tokens_.push_back(Token{k, std::move(text), loc});
    tokens_.back().pos = at == size_t(-1) ? pos_ : at;
    return tokens_.back();
  }

  // One token, or whitespace, a comment or a line continuation; never a newline.
  void token() {
    char c = s_[pos_];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f') return advance();
    if (c == '#') {
      while (pos_ < s_.size() && s_[pos_] != '\n') advance();
      return;
    }
    if (c == '\\') {
      SourceLoc at = here();
      advance();
      if (pos_ < s_.size() && s_[pos_] == '\r') advance();
      if (pos_ >= s_.size() || s_[pos_] != '\n') src_.fail(at, "unexpected character after line continuation");
      return advance();
    }
    if (is_name_start(c)) return name_or_string();
    if (is_digit(c) || (c == '.' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1]))) return number();
    if (c == '"' || c == '\'') return string(here(), pos_, "");
    op();
  }

  // Measures the indentation of a new line; returns false for blank and comment-only lines.
  bool indentation() {
    int width = 0;
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\f')) {
      width = s_[pos_] == '\t' ? (width / 8 + 1) * 8 : s_[pos_] == '\f' ? 0 : width + 1;
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
      std::string p;
      for (char c : word) p += char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      static constexpr std::string_view kPrefixes[] = {"r", "u", "b", "f", "br", "rb", "fr", "rf"};
      for (std::string_view k : kPrefixes)
        if (p == k) return string(at, start, p);
      src_.fail(at, "unknown string prefix '" + word + "'");
    }
    push(Tok::Name, std::move(word), at, start);
  }

  void number() {
    SourceLoc at = here();
    size_t start = pos_;
    auto finish = [&] {
      if (pos_ < s_.size() && is_name_start(s_[pos_]) && !keyword_follows(s_.substr(pos_)))
        src_.fail(here(), "invalid character in a number literal");
    };
    auto digits_of = [&](size_t from) {
      std::string text;
      for (size_t i = from; i < pos_; ++i)
        if (s_[i] != '_') text += s_[i];
      return text;
    };
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && std::string_view("xXoObB").find(s_[pos_ + 1]) != std::string_view::npos) {
      int base = (s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'X') ? 16 : (s_[pos_ + 1] == 'o' || s_[pos_ + 1] == 'O') ? 8 : 2;
      advance(2);
      size_t digits = pos_;
      while (pos_ < s_.size() && (hex_value(s_[pos_]) >= 0 || s_[pos_] == '_')) advance();
      std::string text = digits_of(digits);
      char* end = nullptr;
      errno = 0;
      unsigned long long v = text.empty() ? 0 : std::strtoull(text.c_str(), &end, base);
      std::string spelling(s_.substr(start, pos_ - start));
      if (text.empty() || *end != '\0') src_.fail(at, "invalid integer literal '" + spelling + "'");
      finish();
      Token& t = push(Tok::Int, spelling, at, start);
      t.big = errno == ERANGE || v > uint64_t(INT64_MAX);
      t.int_value = t.big ? 0 : int64_t(v);
      return;
    }
    bool is_float = false;
    while (pos_ < s_.size() && (is_digit(s_[pos_]) || s_[pos_] == '_')) advance();
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_float = true;
      advance();
      while (pos_ < s_.size() && (is_digit(s_[pos_]) || s_[pos_] == '_')) advance();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E') &&
        !(pos_ + 1 < s_.size() && s_[pos_ + 1] == 'l' && keyword_follows(s_.substr(pos_)))) {
      is_float = true;
      advance();
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) advance();
      if (pos_ >= s_.size() || !is_digit(s_[pos_])) src_.fail(at, "invalid float literal: the exponent has no digits");
      while (pos_ < s_.size() && (is_digit(s_[pos_]) || s_[pos_] == '_')) advance();
    }
    std::string text = digits_of(start);
    std::string spelling(s_.substr(start, pos_ - start));
    if (pos_ < s_.size() && (s_[pos_] == 'j' || s_[pos_] == 'J')) {
      advance();
      finish();
      push(Tok::Imag, spelling + "j", at, start).float_value = std::strtod(text.c_str(), nullptr);
      return;
    }
    finish();
    if (is_float) {
      push(Tok::Float, spelling, at, start).float_value = std::strtod(text.c_str(), nullptr);
      return;
    }
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos)
      src_.fail(at, "leading zeros in a decimal integer literal are not allowed (use 0o for octal)");
    Token& t = push(Tok::Int, spelling, at, start);
    t.big = errno == ERANGE || v > uint64_t(INT64_MAX);
    t.int_value = t.big ? 0 : int64_t(v);
  }

  bool at_quote(char q, bool triple) const {
    if (pos_ >= s_.size() || s_[pos_] != q) return false;
    return !triple || (pos_ + 2 < s_.size() && s_[pos_ + 1] == q && s_[pos_ + 2] == q);
  }

  // The escape after a backslash (pos_ is past it), decoded onto value; raw strings keep it as written.
  void escape(std::string& value, bool raw, bool bytes) {
    char e = s_[pos_];
    advance();
    if (e == '\r' && pos_ < s_.size() && s_[pos_] == '\n') {
      if (raw) value += "\\\r";
      e = s_[pos_];
      advance();
    }
    if (raw) {
      value += '\\';
      value += e;
      return;
    }
    auto take_hex = [&](int n) {
      uint32_t v = 0;
      for (int i = 0; i < n && pos_ < s_.size() && hex_value(s_[pos_]) >= 0; ++i) {
        v = v * 16 + uint32_t(hex_value(s_[pos_]));
        advance();
      }
      return v;
    };
    switch (e) {
      case 'n': value += '\n'; return;
      case 't': value += '\t'; return;
      case 'r': value += '\r'; return;
      case 'a': value += '\a'; return;
      case 'b': value += '\b'; return;
      case 'f': value += '\f'; return;
      case 'v': value += '\v'; return;
      case '\n': return;
      case '\\': value += '\\'; return;
      case '\'': value += '\''; return;
      case '"': value += '"'; return;
      case 'x': value += char(take_hex(2)); return;
      case 'u':
      case 'U':
        if (!bytes) return append_utf8(value, take_hex(e == 'u' ? 4 : 8));
        break;
      case 'N':
        // A named character: kept as written (kiln has no Unicode name table); its braces are not a field.
        if (!bytes && pos_ < s_.size() && s_[pos_] == '{') {
          value += "\\N";
          while (pos_ < s_.size() && s_[pos_] != '}' && s_[pos_] != '\n') value += s_[pos_], advance();
          if (pos_ < s_.size() && s_[pos_] == '}') value += '}', advance();
          return;
        }
        break;
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = uint32_t(e - '0');
          for (int i = 0; i < 2 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++i) {
            v = v * 8 + uint32_t(s_[pos_] - '0');
            advance();
          }
          if (bytes || v < 0x80) value += char(v & 0xFF);
          else append_utf8(value, v);
          return;
        }
    }
    value += '\\';
    value += e;
  }

  // A string from its prefix (at, start) to the closing quote; prefix is lowercase.
  void string(SourceLoc at, size_t start, std::string_view prefix) {
    bool raw = prefix.find('r') != std::string_view::npos;
    bool bytes = prefix.find('b') != std::string_view::npos;
    char q = s_[pos_];
    bool triple = pos_ + 2 < s_.size() && s_[pos_ + 1] == q && s_[pos_ + 2] == q;
    advance(triple ? 3 : 1);
    if (prefix.find('f') != std::string_view::npos) return fstring(at, start, q, triple, raw);
    std::string value;
    for (;;) {
      if (pos_ >= s_.size()) src_.fail(at, triple ? "unterminated triple-quoted string" : "unterminated string literal");
      char c = s_[pos_];
      if (!triple && c == '\n') src_.fail(at, "unterminated string literal");
      if (at_quote(q, triple)) {
        advance(triple ? 3 : 1);
        break;
      }
      if (c == '\\' && pos_ + 1 < s_.size()) {
        advance();
        escape(value, raw, bytes);
        continue;
      }
      if (bytes && static_cast<unsigned char>(c) >= 0x80) src_.fail(here(), "bytes can only contain ASCII literal characters");
      value += c;
      advance();
    }
    push(Tok::String, std::move(value), at, start).bytes = bytes;
  }

  // Literal text of an f-string (or of a format spec when in_spec) up to a field, its end or the
  // closing quote; "{{" and "}}" stand for one brace outside specs.
  void fstring_literal(char q, bool triple, bool raw, bool in_spec, SourceLoc at) {
    SourceLoc lit_at = here();
    size_t lit_pos = pos_;
    std::string value;
    for (;;) {
      if (pos_ >= s_.size()) src_.fail(at, triple ? "unterminated triple-quoted f-string" : "unterminated f-string");
      char c = s_[pos_];
      if (!triple && c == '\n') src_.fail(at, "unterminated f-string");
      if (at_quote(q, triple)) break;
      if (c == '{' || c == '}') {
        if (!in_spec && pos_ + 1 < s_.size() && s_[pos_ + 1] == c) {
          value += c;
          advance(2);
          continue;
        }
        break;
      }
      if (c == '\\' && pos_ + 1 < s_.size()) {
        advance();
        // A brace after a backslash still opens or closes a field.
        if (s_[pos_] == '{' || s_[pos_] == '}') value += '\\';
        else escape(value, raw, false);
        continue;
      }
      value += c;
      advance();
    }
    if (!value.empty()) push(Tok::FStringMiddle, std::move(value), lit_at, lit_pos);
  }

  void fstring(SourceLoc at, size_t start, char q, bool triple, bool raw) {
    push(Tok::FStringStart, std::string(s_.substr(start, pos_ - start)), at, start);
    for (;;) {
      fstring_literal(q, triple, raw, false, at);
      if (at_quote(q, triple)) break;
      if (s_[pos_] == '}') src_.fail(here(), "f-string: single '}' is not allowed");
      field(q, triple, raw, at);
    }
    push(Tok::FStringEnd, "", here());
    advance(triple ? 3 : 1);
  }

  // A replacement field from its '{' to its '}': the expression's tokens, then '!' NAME and ':' with
  // the format spec (literal parts and nested fields) when present.
  void field(char q, bool triple, bool raw, SourceLoc at) {
    if (++field_depth_ > 50) src_.fail(here(), "f-string: expressions nested too deeply");
    op();  // '{'
    int base = depth_;
    for (;;) {
      if (pos_ >= s_.size()) src_.fail(at, "f-string: expecting '}'");
      char c = s_[pos_];
      if (c == '\n') {
        if (!triple) src_.fail(at, "unterminated f-string");
        advance();
        continue;
      }
      if (at_quote(q, triple)) src_.fail(here(), "f-string: expecting '}'");
      if (depth_ == base) {
        if (c == '}') break;
        if (c == '!' && !(pos_ + 1 < s_.size() && s_[pos_ + 1] == '=')) {
          push(Tok::Op, "!", here());
          advance();
          continue;
        }
        if (c == ':') {
          push(Tok::Op, ":", here());
          advance();
          for (;;) {
            fstring_literal(q, triple, raw, true, at);
            if (at_quote(q, triple)) src_.fail(at, "f-string: expecting '}'");
            if (s_[pos_] == '}') break;
            field(q, triple, raw, at);
          }
          break;
        }
        if (c == '#') src_.fail(here(), "f-string expression part cannot include '#'");
      }
      token();
    }
    op();  // '}'
    --field_depth_;
  }

  void op() {
    SourceLoc at = here();
    for (std::string_view o : kOps) {
      if (s_.substr(pos_, o.size()) != o) continue;
      if (o == "(" || o == "[" || o == "{") {
        if (depth_ >= 200) src_.fail(at, "too many nested parentheses");
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
      advance(o.size());
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
  int field_depth_ = 0;
  std::vector<SourceLoc> open_;
  std::vector<char> open_char_;
  std::vector<int> indents_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const Source& src) { return Lexer(src).run(); }

}  // namespace kiln::script
