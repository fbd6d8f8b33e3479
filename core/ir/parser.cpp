#include "core/ir/parser.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "core/source_error.h"

namespace kiln::ir {

namespace {

enum class Tok : uint8_t { Value, Ident, Number, String, Punct, Arrow, Newline, End };

struct Token {
  Tok kind;
  std::string text;  // for Value without the '%', for String unescaped
  SourceLoc loc;
};

constexpr int kMaxNesting = 64;

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view name) : src_(text), name_(name) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skip_space();
      SourceLoc at{line_, col_};
      if (pos_ >= src_.size()) {
        out.push_back({Tok::Newline, "", at});
        out.push_back({Tok::End, "", at});
        return out;
      }
      char c = src_[pos_];
      if (c == '\n') {
        advance();
        out.push_back({Tok::Newline, "", at});
      } else if (c == '%') {
        advance();
        size_t start = pos_;
        while (pos_ < src_.size() && (is_ident(src_[pos_]) || src_[pos_] == '.')) advance();
        if (pos_ == start) error(at, "expected a value name after '%'");
        out.push_back({Tok::Value, std::string(src_.substr(start, pos_ - start)), at});
      } else if (std::isalpha(uint8_t(c)) || c == '_') {
        size_t start = pos_;
        while (pos_ < src_.size()) {
          if (is_ident(src_[pos_])) advance();
          else if (src_.substr(pos_, 2) == "::") advance(), advance();
          else break;
        }
        out.push_back({Tok::Ident, std::string(src_.substr(start, pos_ - start)), at});
      } else if (std::isdigit(uint8_t(c)) || (c == '-' && pos_ + 1 < src_.size() &&
                                               (std::isdigit(uint8_t(src_[pos_ + 1])) || src_[pos_ + 1] == 'i'))) {
        out.push_back({Tok::Number, number(), at});
      } else if (c == '"') {
        out.push_back({Tok::String, string(at), at});
      } else if (c == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '>') {
        advance(), advance();
        out.push_back({Tok::Arrow, "->", at});
      } else if (std::string_view("()[]<>,:=?*").find(c) != std::string_view::npos) {
        advance();
        out.push_back({Tok::Punct, std::string(1, c), at});
      } else {
        error(at, std::isprint(uint8_t(c)) ? fmt::format("unexpected character '{}'", c)
                                           : fmt::format("unexpected byte 0x{:02x}", uint8_t(c)));
      }
    }
  }

 private:
  static bool is_ident(char c) { return std::isalnum(uint8_t(c)) || c == '_'; }
  void advance() {
    if (src_[pos_] == '\n') ++line_, col_ = 1;
    else ++col_;
    ++pos_;
  }
  void skip_space() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') advance();
      else if (c == '#')
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
      else break;
    }
  }
  std::string number() {
    size_t start = pos_;
    if (src_[pos_] == '-') advance();
    if (src_.substr(pos_, 3) == "inf") {
      for (int i = 0; i < 3; ++i) advance();
      return std::string(src_.substr(start, pos_ - start));
    }
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      bool exp_sign = (c == '-' || c == '+') && (src_[pos_ - 1] == 'e' || src_[pos_ - 1] == 'E');
      if (std::isalnum(uint8_t(c)) || c == '.' || exp_sign) advance();
      else break;
    }
    return std::string(src_.substr(start, pos_ - start));
  }
  std::string string(SourceLoc at) {
    advance();
    std::string s;
    while (true) {
      if (pos_ >= src_.size() || src_[pos_] == '\n') error(at, "unterminated string");
      char c = src_[pos_];
      advance();
      if (c == '"') return s;
      if (c == '\\') {
        if (pos_ >= src_.size()) error(at, "unterminated string");
        char e = src_[pos_];
        advance();
        if (e == 'n') s += '\n';
        else if (e == '"' || e == '\\') s += e;
        else error({line_, col_ - 1}, fmt::format("unknown escape '\\{}' in string", e));
      } else {
        s += c;
      }
    }
  }
  [[noreturn]] void error(SourceLoc at, const std::string& msg) { fail_at(name_, src_, at, msg); }

  std::string_view src_, name_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view name) : src_(text), name_(name) {
    toks_ = Lexer(text, name).run();
  }

  std::unique_ptr<Graph> graph() {
    auto g = std::make_unique<Graph>();
    g_ = g.get();
    skip_newlines();
    expect_ident("graph");
    scopes_.emplace_back();
    params(g_->block());
    expect_punct(":");
    expect_newline();
    body(g_->block(), /*top=*/true);
    skip_newlines();
    if (peek().kind != Tok::End) error(peek().loc, "expected the end of the graph after 'return'");
    return g;
  }

  Type type_only() {
    Type t = type(0);
    skip_newlines();
    if (peek().kind != Tok::End) error(peek().loc, fmt::format("unexpected '{}' after the type", peek().text));
    return t;
  }

 private:
  // ---- tokens ----
  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  bool at_punct(std::string_view p) const { return peek().kind == Tok::Punct && peek().text == p; }
  bool accept_punct(std::string_view p) {
    if (!at_punct(p)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Value: return "'%" + t.text + "'";
      case Tok::Newline: return "end of line";
      case Tok::End: return "end of input";
      case Tok::String: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  void expect_punct(std::string_view p) {
    if (!accept_punct(p)) error(peek().loc, fmt::format("expected '{}', got {}", p, describe(peek())));
  }
  void expect_ident(std::string_view word) {
    if (peek().kind != Tok::Ident || peek().text != word)
      error(peek().loc, fmt::format("expected '{}', got {}", word, describe(peek())));
    next();
  }
  void expect_newline() {
    if (peek().kind != Tok::Newline) error(peek().loc, fmt::format("expected end of line, got {}", describe(peek())));
    skip_newlines();
  }
  void skip_newlines() {
    while (peek().kind == Tok::Newline) next();
  }
  [[noreturn]] void error(SourceLoc at, const std::string& msg) { fail_at(name_, src_, at, msg); }

  // ---- values and scopes ----
  Value* lookup(const Token& t) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(t.text);
      if (f != it->end()) return f->second;
    }
    error(t.loc, fmt::format("use of undefined value %{}", t.text));
  }
  void define(const Token& t, Value* v) {
    for (auto& s : scopes_)
      if (s.count(t.text)) error(t.loc, fmt::format("redefinition of value %{}", t.text));
    scopes_.back()[t.text] = v;
    v->set_name(t.text);
  }
  Token value_token() {
    if (peek().kind != Tok::Value) error(peek().loc, fmt::format("expected a value (%name), got {}", describe(peek())));
    return next();
  }
  std::vector<Value*> value_list() {
    expect_punct("(");
    std::vector<Value*> vs;
    if (!at_punct(")")) {
      do vs.push_back(lookup(value_token()));
      while (accept_punct(","));
    }
    expect_punct(")");
    return vs;
  }
  void params(Block* b) {
    expect_punct("(");
    if (!at_punct(")")) {
      do {
        Token t = value_token();
        expect_punct(":");
        Value* v = b->add_input(type(0));
        define(t, v);
      } while (accept_punct(","));
    }
    expect_punct(")");
  }

  // ---- types ----
  Type type(int depth) {
    if (depth > kMaxNesting) error(peek().loc, "types nest too deeply");
    const Token& t = peek();
    if (t.kind != Tok::Ident) error(t.loc, fmt::format("expected a type, got {}", describe(t)));
    std::string w = next().text;
    if (w == "int") return Type::scalar(TypeKind::Int);
    if (w == "float") return Type::scalar(TypeKind::Float);
    if (w == "str") return Type::scalar(TypeKind::Str);
    if (w == "NoneType") return Type::scalar(TypeKind::None);
    if (w == "bool" && !at_punct("[")) return Type::scalar(TypeKind::Bool);
    if (w == "Tuple" || w == "List" || w == "Optional") {
      expect_punct("[");
      std::vector<Type> elems;
      if (!at_punct("]")) {
        do elems.push_back(type(depth + 1));
        while (accept_punct(","));
      }
      expect_punct("]");
      if (w == "Tuple") return Type::tuple(std::move(elems));
      if (elems.size() != 1) error(t.loc, fmt::format("{} takes one element type, got {}", w, elems.size()));
      return w == "List" ? Type::list(std::move(elems[0])) : Type::optional(std::move(elems[0]));
    }
    std::optional<DType> dt;
    if (w != "Tensor") {
      DType d;
      if (!dtype_from_short_name(w, &d)) error(t.loc, fmt::format("unknown type '{}'", w));
      dt = d;
    }
    if (!accept_punct("[")) {
      if (dt) error(peek().loc, fmt::format("expected '[' and the shape after {}", w));
      return Type::tensor();
    }
    if (accept_punct("*")) {
      expect_punct("]");
      return Type::tensor(dt);
    }
    std::vector<Dim> dims;
    if (!at_punct("]")) {
      do dims.push_back(dim());
      while (accept_punct(","));
    }
    expect_punct("]");
    return Type::tensor(dt, std::move(dims));
  }
  Dim dim() {
    const Token& t = next();
    if (t.kind == Tok::Punct && t.text == "?") return Dim::unknown();
    if (t.kind == Tok::Ident) return Dim::symbolic(t.text);
    if (t.kind == Tok::Number) {
      int64_t v;
      if (!parse_int(t.text, &v) || v < 0) error(t.loc, fmt::format("bad dimension '{}'", t.text));
      return Dim::known(v);
    }
    error(t.loc, fmt::format("expected a dimension (a size, a name or ?), got {}", describe(t)));
  }
  static bool parse_int(const std::string& s, int64_t* out) {
    if (s.find_first_of(".eEin") != std::string::npos) return false;
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
  }
  static bool parse_float(const std::string& s, double* out) {
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (*end || (errno && !std::isinf(v) && v != 0)) return false;
    *out = v;
    return true;
  }

  // ---- attributes ----
  // A list attribute's raw items, kept as tokens: a tensor constant converts them in its own dtype.
  struct RawAttr {
    Token key;
    AttrValue value;
    std::vector<Token> items;  // for lists
    bool is_list = false;
    bool elided = false;
  };
  std::vector<RawAttr> attrs() {
    std::vector<RawAttr> out;
    if (!accept_punct("[")) return out;
    do {
      RawAttr a;
      if (peek().kind != Tok::Ident) error(peek().loc, fmt::format("expected an attribute name, got {}", describe(peek())));
      a.key = next();
      for (const RawAttr& prev : out)
        if (prev.key.text == a.key.text) error(a.key.loc, fmt::format("attribute '{}' given twice", a.key.text));
      expect_punct("=");
      attr_value(a);
      out.push_back(std::move(a));
    } while (accept_punct(","));
    expect_punct("]");
    return out;
  }
  void attr_value(RawAttr& a) {
    const Token& t = next();
    switch (t.kind) {
      case Tok::Number: {
        int64_t i;
        double d;
        if (parse_int(t.text, &i)) a.value = i;
        else if (parse_float(t.text, &d)) a.value = d;
        else error(t.loc, fmt::format("bad number '{}'", t.text));
        return;
      }
      case Tok::String: a.value = t.text; return;
      case Tok::Ident: {
        DType d;
        if (t.text == "true" || t.text == "false") a.value = t.text == "true";
        else if (t.text == "inf" || t.text == "nan") a.value = t.text == "inf" ? INFINITY : NAN;
        else if (dtype_from_short_name(t.text, &d)) a.value = d;
        else error(t.loc, fmt::format("expected an attribute value, got '{}'", t.text));
        return;
      }
      case Tok::Punct:
        if (t.text == "[") {
          a.is_list = true;
          if (!at_punct("]")) {
            do {
              const Token& item = next();
              if (item.kind != Tok::Number && item.kind != Tok::Ident)
                error(item.loc, fmt::format("expected a number in the list, got {}", describe(item)));
              a.items.push_back(item);
            } while (accept_punct(","));
          }
          expect_punct("]");
          return;
        }
        if (t.text == "<") {  // the printer's `<N elements>` for a large tensor constant
          while (!at_punct(">") && peek().kind != Tok::Newline) next();
          expect_punct(">");
          a.elided = true;
          return;
        }
        break;
      default: break;
    }
    error(t.loc, fmt::format("expected an attribute value, got {}", describe(t)));
  }
  Shape int_list(const RawAttr& a) {
    Shape s;
    for (const Token& t : a.items) {
      int64_t v;
      if (!parse_int(t.text, &v)) error(t.loc, fmt::format("attribute '{}' takes integers, got '{}'", a.key.text, t.text));
      s.push_back(v);
    }
    return s;
  }
  Tensor tensor_constant(const RawAttr& a, const Type& ty) {
    if (a.elided) error(a.key.loc, "a tensor constant whose elements were elided cannot be read back");
    if (!a.is_list) error(a.key.loc, "a tensor constant's value must be a list of its elements");
    if (!ty.is_tensor() || !ty.dtype || !ty.has_static_shape())
      error(a.key.loc, fmt::format("a tensor constant needs a dtype and a static shape, got type {}", ty.str()));
    Shape shape = ty.static_shape();
    if (int64_t(a.items.size()) != numel_of(shape))
      error(a.key.loc, fmt::format("a constant of type {} needs {} elements, got {}", ty.str(), numel_of(shape), a.items.size()));
    Tensor t = Tensor::empty(shape, *ty.dtype);
    visit_dtype(*ty.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* p = static_cast<T*>(t.raw_data());
      for (size_t i = 0; i < a.items.size(); ++i) {
        const Token& tok = a.items[i];
        if constexpr (std::is_same_v<T, bool>) {
          if (tok.text != "true" && tok.text != "false") error(tok.loc, fmt::format("expected true or false, got '{}'", tok.text));
          p[i] = tok.text == "true";
        } else if constexpr (std::is_integral_v<T>) {
          int64_t v;
          if (!parse_int(tok.text, &v)) error(tok.loc, fmt::format("expected an integer, got '{}'", tok.text));
          p[i] = T(v);
        } else {
          double v;
          std::string s = tok.text;
          if (!parse_float(s, &v)) error(tok.loc, fmt::format("expected a number, got '{}'", tok.text));
          // float32 text was printed as the shortest float, so read it as one
          if constexpr (std::is_same_v<T, float>) p[i] = std::strtof(s.c_str(), nullptr);
          else p[i] = T(v);
        }
      }
    });
    return t;
  }

  // ---- nodes and blocks ----
  // Returns false at the block's terminator (`return` or `->`), which it consumes.
  bool statement(Block* b, bool top) {
    skip_newlines();
    const Token& first = peek();
    if (top && first.kind == Tok::Ident && first.text == "return") {
      next();
      for (Value* v : value_list()) b->register_output(v);
      expect_newline();
      return false;
    }
    if (!top && first.kind == Tok::Arrow) {
      next();
      for (Value* v : value_list()) b->register_output(v);
      expect_newline();
      return false;
    }
    if (first.kind == Tok::End)
      error(first.loc, top ? "expected 'return' at the end of the graph" : "expected '->' at the end of the block");
    node(b);
    return true;
  }

  void node(Block* b) {
    std::vector<std::pair<Token, Type>> outs;
    if (peek().kind == Tok::Value) {
      do {
        Token t = value_token();
        expect_punct(":");
        outs.emplace_back(t, type(0));
      } while (accept_punct(","));
      expect_punct("=");
    }
    const Token kind = next();
    if (kind.kind != Tok::Ident) error(kind.loc, fmt::format("expected an op name, got {}", describe(kind)));
    std::vector<RawAttr> raw = attrs();
    std::vector<Value*> inputs = value_list();
    Node* n;
    OpId op;
    Prim prim;
    if (op_from_name(kind.text, &op)) {
      n = g_->create_op(op, inputs, {}, 0);
    } else if (prim_from_name(kind.text, &prim)) {
      n = g_->create(prim, 0);
      for (Value* v : inputs) n->add_input(v);
    } else {
      error(kind.loc, fmt::format("unknown op '{}'", kind.text));
    }
    n->line = kind.loc.line;
    b->append(n);
    for (RawAttr& a : raw) {
      bool tensor_value = n->prim() == Prim::Constant && a.key.text == "value" && outs.size() == 1 && outs[0].second.is_tensor();
      if (tensor_value) n->set_tensor(tensor_constant(a, outs[0].second));
      else if (a.elided) error(a.key.loc, "only a tensor constant's value can be elided");
      else if (a.is_list) n->attrs().set(a.key.text, int_list(a));
      else n->attrs().set(a.key.text, std::move(a.value));
    }
    expect_newline();
    int index = 0;
    while (peek().kind == Tok::Ident && peek().text == fmt::format("block{}", index)) {
      if (++index > kMaxNesting * 16) error(peek().loc, "too many blocks");
      if (int(scopes_.size()) > kMaxNesting) error(peek().loc, "blocks nest too deeply");
      next();
      Block* sub = n->add_block();
      scopes_.emplace_back();
      params(sub);
      expect_punct(":");
      expect_newline();
      while (statement(sub, false)) {
      }
      scopes_.pop_back();
    }
    // Outputs are defined after the blocks: a block cannot use its own node's results.
    for (auto& [tok, ty] : outs) define(tok, n->add_output(std::move(ty)));
  }

  void body(Block* b, bool top) {
    while (statement(b, top)) {
    }
  }

  std::string_view src_, name_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  Graph* g_ = nullptr;
  std::vector<std::unordered_map<std::string, Value*>> scopes_;
};

}  // namespace

std::unique_ptr<Graph> parse_ir(std::string_view text, std::string_view name) { return Parser(text, name).graph(); }

Type parse_type(std::string_view text) { return Parser(text, "<type>").type_only(); }

}  // namespace kiln::ir
