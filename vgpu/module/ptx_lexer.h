// Tokens of PTX text, produced one at a time (a module may hold hundreds of megabytes of PTX,
// so no token vector is built). Comments disappear; words are runs of [A-Za-z0-9_$%.] (so
// ".param", "sm_90", "0f3F800000", "1.5e+3" are one token each); strings keep their quotes;
// everything else is a one-character punctuation token.
#pragma once

#include <cstddef>
#include <string_view>

namespace vgpu::module {

struct PtxToken {
  enum Kind { end, word, string, punct } kind = end;
  std::string_view text;
  size_t line = 0;

  bool is(std::string_view s) const { return kind != end && kind != string && text == s; }
  bool is_directive() const { return kind == word && !text.empty() && text[0] == '.'; }
};

class PtxLexer {
 public:
  explicit PtxLexer(std::string_view text) : text_(text) { advance(); }

  const PtxToken& peek() const { return current_; }
  PtxToken next() {
    PtxToken t = current_;
    advance();
    return t;
  }

 private:
  void advance();  // throws ImageError (invalid_ptx) on bytes PTX cannot contain

  std::string_view text_;
  size_t pos_ = 0;
  size_t line_ = 1;
  PtxToken current_;
};

}  // namespace vgpu::module
