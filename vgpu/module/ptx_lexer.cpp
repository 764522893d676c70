#include "module/ptx_lexer.h"

#include "module/image_error.h"

namespace vgpu::module {
namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

// "1.5e", "2E": a decimal number so far, ending in an exponent marker (not hex like 0x1e,
// 0f3E800000).
bool is_decimal_exponent(std::string_view w) {
  if (w.size() < 2 || w[0] < '0' || w[0] > '9' || (w.back() != 'e' && w.back() != 'E')) return false;
  for (size_t i = 0; i + 1 < w.size(); ++i)
    if (!((w[i] >= '0' && w[i] <= '9') || w[i] == '.')) return false;
  return true;
}

}  // namespace

void PtxLexer::advance() {
  const size_t n = text_.size();
  // Skip whitespace and comments.
  for (;;) {
    while (pos_ < n && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r' || text_[pos_] == '\n' ||
                        text_[pos_] == '\f' || text_[pos_] == '\v')) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
    if (pos_ + 1 < n && text_[pos_] == '/' && text_[pos_ + 1] == '/') {
      while (pos_ < n && text_[pos_] != '\n') ++pos_;
      continue;
    }
    if (pos_ + 1 < n && text_[pos_] == '/' && text_[pos_ + 1] == '*') {
      const size_t close = text_.find("*/", pos_ + 2);
      if (close == std::string_view::npos) fail_kind(ErrorKind::invalid_ptx, "PTX line {}: unterminated comment", line_);
      for (size_t i = pos_; i < close; ++i) line_ += text_[i] == '\n';
      pos_ = close + 2;
      continue;
    }
    break;
  }
  current_ = PtxToken{};
  current_.line = line_;
  if (pos_ >= n) return;  // kind end

  const size_t start = pos_;
  const char c = text_[pos_];
  if (is_word_char(c)) {
    while (pos_ < n && is_word_char(text_[pos_])) {
      ++pos_;
      // A decimal exponent sign belongs to the number: 1.5e+3, 2E-7.
      if (pos_ + 1 < n && (text_[pos_] == '+' || text_[pos_] == '-') && is_decimal_exponent(text_.substr(start, pos_ - start)) &&
          text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9')
        ++pos_;
    }
    current_.kind = PtxToken::word;
  } else if (c == '"') {
    ++pos_;
    while (pos_ < n && text_[pos_] != '"') {
      if (text_[pos_] == '\n') fail_kind(ErrorKind::invalid_ptx, "PTX line {}: unterminated string", line_);
      pos_ += (text_[pos_] == '\\' && pos_ + 1 < n) ? 2 : 1;
    }
    if (pos_ >= n) fail_kind(ErrorKind::invalid_ptx, "PTX line {}: unterminated string", line_);
    ++pos_;
    current_.kind = PtxToken::string;
  } else if (static_cast<unsigned char>(c) > 32 && static_cast<unsigned char>(c) < 127) {
    ++pos_;
    current_.kind = PtxToken::punct;
  } else {
    fail_kind(ErrorKind::invalid_ptx, "PTX line {}: unexpected byte {:#04x}", line_, static_cast<unsigned char>(c));
  }
  current_.text = text_.substr(start, pos_ - start);
}

}  // namespace vgpu::module
