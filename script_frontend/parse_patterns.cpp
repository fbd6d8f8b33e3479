// The match statement (Python 3.10's soft keywords) and its patterns. `match` and `case` stay
// ordinary names wherever the statement's shape does not follow them.
#include <fmt/format.h>

#include "script_frontend/parser_impl.h"

namespace kiln::script {

namespace {

// Tokens after `match` that can start a subject expression; anything else makes `match` a name.
bool may_start_subject(const Token& t) {
  switch (t.kind) {
    case Tok::Name: return t.text != "in" && t.text != "is" && t.text != "and" && t.text != "or" && t.text != "if" &&
                           t.text != "else" && t.text != "for";
    case Tok::Int:
    case Tok::Float:
    case Tok::Imag:
    case Tok::String:
    case Tok::FStringStart: return true;
    case Tok::Op:
      return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" || t.text == "+" || t.text == "~" ||
             t.text == "*" || t.text == "...";
    case Tok::FStringMiddle:
    case Tok::FStringEnd:
    case Tok::Newline:
    case Tok::Indent:
    case Tok::Dedent:
    case Tok::End: return false;
  }
  return false;
}

}  // namespace

StmtPtr Parser::match_stmt() {
  if (!may_start_subject(peek())) return nullptr;
  size_t saved = pos_;
  int saved_depth = depth_;
  auto s = make(StmtKind::Match, cur().loc);
  try {
    next();  // match
    s->value = star_expressions();
  } catch (const Error&) {
    s->value.reset();
  }
  if (!s->value || !at_op(":") || peek().kind != Tok::Newline || peek(2).kind != Tok::Indent ||
      peek(3).kind != Tok::Name || peek(3).text != "case") {
    pos_ = saved;
    depth_ = saved_depth;
    return nullptr;
  }
  next();  // :
  next();  // newline
  next();  // indent
  while (!accept(Tok::Dedent)) {
    if (at(Tok::End)) fail_here("expected a dedent");
    if (!accept_name("case")) fail_here(fmt::format("expected 'case' in the match block, found {}", describe(cur())));
    MatchCase c;
    c.pattern = patterns();
    if (accept_name("if")) c.guard = named_expression();
    expect_op(":", "after the case pattern");
    c.body = suite();
    s->cases.push_back(std::move(c));
  }
  return s;
}

// A case's patterns: one, or several separated by commas (an open sequence).
Pattern Parser::patterns() {
  SourceLoc loc = cur().loc;
  Pattern first = pattern();
  if (!at_op(",")) return first;
  Pattern seq{Pattern::Kind::Sequence, loc};
  seq.patterns.push_back(std::move(first));
  while (accept_op(",")) {
    if (at_op(":") || at_name("if")) break;
    seq.patterns.push_back(pattern());
  }
  return seq;
}

Pattern Parser::pattern() {
  DepthGuard g(*this);
  SourceLoc loc = cur().loc;
  if (at_op("*")) {
    next();
    Pattern star{Pattern::Kind::Star, loc};
    std::string n = expect_name("after '*' in a pattern");
    if (n != "_") star.name = n;
    return star;
  }
  Pattern p = or_pattern();
  if (!accept_name("as")) return p;
  Pattern as{Pattern::Kind::As, loc};
  as.patterns.push_back(std::move(p));
  as.name = expect_name("after 'as'");
  return as;
}

Pattern Parser::or_pattern() {
  SourceLoc loc = cur().loc;
  Pattern first = closed_pattern();
  if (!at_op("|")) return first;
  Pattern alt{Pattern::Kind::Or, loc};
  alt.patterns.push_back(std::move(first));
  while (accept_op("|")) alt.patterns.push_back(closed_pattern());
  return alt;
}

Pattern Parser::sequence_items(Pattern::Kind kind, std::string_view close, SourceLoc loc) {
  Pattern seq{kind, loc};
  while (!at_op(close)) {
    seq.patterns.push_back(pattern());
    if (!accept_op(",")) break;
  }
  expect_op(close, "to close the pattern");
  return seq;
}

Pattern Parser::closed_pattern() {
  DepthGuard g(*this);
  SourceLoc loc = cur().loc;
  if (at(Tok::Int) || at(Tok::Float) || at(Tok::Imag) || at_op("-")) {
    Pattern v{Pattern::Kind::Value, loc};
    v.value = arith_expr();
    return v;
  }
  if (at(Tok::String) || at(Tok::FStringStart)) {
    Pattern v{Pattern::Kind::Value, loc};
    v.value = strings();
    if (v.value->kind == ExprKind::FString) src_.fail(loc, "patterns may only match literals and attribute lookups");
    return v;
  }
  if (at_name("None") || at_name("True") || at_name("False")) {
    Pattern v{Pattern::Kind::Singleton, loc};
    v.value = atom();
    return v;
  }
  if (at_op("(")) {
    next();
    if (accept_op(")")) return Pattern{Pattern::Kind::Sequence, loc};
    Pattern first = pattern();
    if (accept_op(")")) return first;  // a group
    expect_op(",", "in the pattern");
    Pattern seq = sequence_items(Pattern::Kind::Sequence, ")", loc);
    seq.patterns.insert(seq.patterns.begin(), std::move(first));
    return seq;
  }
  if (at_op("[")) {
    next();
    return sequence_items(Pattern::Kind::Sequence, "]", loc);
  }
  if (at_op("{")) {
    next();
    Pattern m{Pattern::Kind::Mapping, loc};
    while (!at_op("}")) {
      if (accept_op("**")) {
        m.name = expect_name("after '**' in a pattern");
      } else {
        if (at_name("None") || at_name("True") || at_name("False")) {
          m.keys.push_back(atom());
        } else if (at(Tok::Name)) {
          if (!(peek().kind == Tok::Op && peek().text == "."))
            fail_here("mapping pattern keys may only match literals and attribute lookups");
          m.keys.push_back(primary());
        } else {
          m.keys.push_back(at(Tok::String) ? strings() : arith_expr());
        }
        expect_op(":", "after the mapping pattern key");
        m.patterns.push_back(pattern());
      }
      if (!accept_op(",")) break;
    }
    expect_op("}", "to close the mapping pattern");
    return m;
  }
  if (at(Tok::Name) && !at_keyword()) {
    std::string first = cur().text;
    ExprPtr name = expr(ExprKind::Name, loc);
    name->name = next().text;
    bool dotted = false;
    while (at_op(".")) {
      next();
      auto a = expr(ExprKind::Attribute, cur().loc);
      a->name = expect_name("after '.'");
      a->args.push_back(std::move(name));
      name = std::move(a);
      dotted = true;
    }
    if (accept_op("(")) {
      Pattern c{Pattern::Kind::Class, loc};
      c.value = std::move(name);
      while (!at_op(")")) {
        if (at(Tok::Name) && peek().kind == Tok::Op && peek().text == "=") {
          c.kwd_names.push_back(next().text);
          next();
          c.kwd_patterns.push_back(pattern());
        } else {
          if (!c.kwd_names.empty()) fail_here("positional patterns follow keyword patterns");
          c.patterns.push_back(pattern());
        }
        if (!accept_op(",")) break;
      }
      expect_op(")", "to close the class pattern");
      return c;
    }
    if (dotted) {
      Pattern v{Pattern::Kind::Value, loc};
      v.value = std::move(name);
      return v;
    }
    Pattern capture{Pattern::Kind::As, loc};
    if (first != "_") capture.name = first;
    return capture;
  }
  fail_here(fmt::format("invalid pattern: unexpected {}", describe(cur())));
}

}  // namespace kiln::script
