#include "module/ptx.h"

#include "module/image_error.h"
#include "module/ptx_lexer.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_set>

namespace vgpu::module {
namespace {

constexpr uint64_t kMaxParamBlock = uint64_t{1} << 20;   // far above the 32764 bytes PTX allows
constexpr uint64_t kMaxInitBytes = uint64_t{1} << 28;  // 256 MiB of initial values per variable
constexpr int kMaxInitDepth = 32;

enum class TypeClass { integer, floating, bits };
struct ScalarType {
  uint32_t size = 0;
  TypeClass cls = TypeClass::integer;
};

std::optional<ScalarType> scalar_type(std::string_view w) {
  struct Entry {
    std::string_view name;
    ScalarType type;
  };
  static constexpr Entry kTypes[] = {
      {".b8", {1, TypeClass::integer}},     {".u8", {1, TypeClass::integer}},     {".s8", {1, TypeClass::integer}},
      {".pred", {1, TypeClass::integer}},   {".b16", {2, TypeClass::integer}},    {".u16", {2, TypeClass::integer}},
      {".s16", {2, TypeClass::integer}},    {".f16", {2, TypeClass::bits}},       {".bf16", {2, TypeClass::bits}},
      {".e4m3x2", {2, TypeClass::bits}},    {".e5m2x2", {2, TypeClass::bits}},    {".b32", {4, TypeClass::integer}},
      {".u32", {4, TypeClass::integer}},    {".s32", {4, TypeClass::integer}},    {".f32", {4, TypeClass::floating}},
      {".f16x2", {4, TypeClass::bits}},     {".bf16x2", {4, TypeClass::bits}},    {".tf32", {4, TypeClass::bits}},
      {".b64", {8, TypeClass::integer}},    {".u64", {8, TypeClass::integer}},    {".s64", {8, TypeClass::integer}},
      {".f64", {8, TypeClass::floating}},   {".b128", {16, TypeClass::integer}},
  };
  for (const Entry& e : kTypes)
    if (e.name == w) return e.type;
  return std::nullopt;
}

// A numeric literal: integers keep their bits, floats their value; 0fXXXXXXXX / 0dXXXX...
// give the bits of a float / double.
struct Number {
  bool is_float = false;
  uint64_t bits = 0;
  double value = 0;
};

std::optional<Number> parse_number(std::string_view w) {
  if (w.empty() || w[0] < '0' || w[0] > '9') return std::nullopt;
  Number n;
  auto parse_uint = [&](std::string_view digits, int base) -> bool {
    if (digits.empty()) return false;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n.bits, base);
    return r.ec == std::errc() && r.ptr == digits.data() + digits.size();
  };
  if (w.size() == 10 && (w[1] == 'f' || w[1] == 'F')) {
    if (!parse_uint(w.substr(2), 16)) return std::nullopt;
    float f;
    const auto u = static_cast<uint32_t>(n.bits);
    std::memcpy(&f, &u, 4);
    n.is_float = true;
    n.value = f;
    return n;
  }
  if (w.size() == 18 && (w[1] == 'd' || w[1] == 'D')) {
    if (!parse_uint(w.substr(2), 16)) return std::nullopt;
    n.is_float = true;
    n.value = std::bit_cast<double>(n.bits);
    return n;
  }
  if (w.size() > 1 && (w[1] == 'x' || w[1] == 'X')) {
    std::string_view d = w.substr(2);
    if (!d.empty() && (d.back() == 'U' || d.back() == 'u')) d.remove_suffix(1);
    return parse_uint(d, 16) ? std::optional(n) : std::nullopt;
  }
  if (w.size() > 1 && (w[1] == 'b' || w[1] == 'B')) {
    std::string_view d = w.substr(2);
    if (!d.empty() && (d.back() == 'U' || d.back() == 'u')) d.remove_suffix(1);
    return parse_uint(d, 2) ? std::optional(n) : std::nullopt;
  }
  if (w.find_first_of(".eE") != std::string_view::npos) {
    const auto r = std::from_chars(w.data(), w.data() + w.size(), n.value);
    if (r.ec != std::errc() || r.ptr != w.data() + w.size()) return std::nullopt;
    n.is_float = true;
    return n;
  }
  std::string_view d = w;
  if (d.back() == 'U' || d.back() == 'u') d.remove_suffix(1);
  const int base = (d.size() > 1 && d[0] == '0') ? 8 : 10;
  return parse_uint(d, base) ? std::optional(n) : std::nullopt;
}

uint32_t product(const std::array<uint32_t, 3>& d) {
  const uint64_t p = uint64_t{d[0]} * d[1] * d[2];
  return static_cast<uint32_t>(std::min<uint64_t>(p, UINT32_MAX));
}

class PtxParser {
 public:
  explicit PtxParser(std::string_view text) : lex_(text) {}

  ModuleImage parse() {
    const PtxToken first = lex_.next();
    if (!first.is(".version")) error(first, "PTX must begin with .version");
    expect_word("a PTX ISA version");
    bool is_extern = false;
    while (lex_.peek().kind != PtxToken::end) {
      const PtxToken t = lex_.next();
      if (t.is(".target")) {
        read_target();
      } else if (t.is(".address_size")) {
        expect_word("an address size");
      } else if (t.is(".file")) {
        read_file_directive();
      } else if (t.is(".visible") || t.is(".weak") || t.is(".common")) {
        continue;  // linkage: keeps is_extern as is for the declaration that follows
      } else if (t.is(".extern")) {
        is_extern = true;
        continue;
      } else if (t.is(".entry")) {
        parse_entry(is_extern);
      } else if (t.is(".global") || t.is(".const")) {
        parse_variable(t.is(".const") ? GlobalSpace::constant : GlobalSpace::global, is_extern);
      } else if (t.is("{")) {
        skip_block(t);
      } else if (t.is("}")) {
        error(t, "unbalanced '}}'");
      } else {
        skip_declaration(t);  // .func, .shared, .tex, .alias, .section, .pragma, ...
      }
      is_extern = false;
    }
    image_.sm_arch = target_;
    image_.from_ptx = true;
    image_.kind = ImageKind::ptx;
    return std::move(image_);
  }

  int target() const { return target_; }

 private:
  template <class... A>
  [[noreturn]] void error(const PtxToken& at, fmt::format_string<A...> f, A&&... a) {
    fail_kind(ErrorKind::invalid_ptx, "PTX line {}: {}", at.line, fmt::format(f, std::forward<A>(a)...));
  }

  PtxToken expect_word(const char* what) {
    const PtxToken t = lex_.next();
    if (t.kind != PtxToken::word) error(t, "expected {}", what);
    return t;
  }
  void expect(std::string_view punct) {
    const PtxToken t = lex_.next();
    if (!t.is(punct)) error(t, "expected '{}'", punct);
  }
  bool accept(std::string_view punct) {
    if (!lex_.peek().is(punct)) return false;
    lex_.next();
    return true;
  }
  uint64_t expect_uint(const char* what) {
    const PtxToken t = expect_word(what);
    const auto n = parse_number(t.text);
    if (!n || n->is_float) error(t, "expected {}, found '{}'", what, t.text);
    return n->bits;
  }

  void read_target() {
    for (;;) {
      const PtxToken t = expect_word("a target");
      if (t.text.substr(0, 3) == "sm_" && target_ == 0) {
        int arch = 0;
        std::from_chars(t.text.data() + 3, t.text.data() + t.text.size(), arch);
        target_ = arch;
      }
      if (!accept(",")) break;
    }
  }

  void read_file_directive() {  // .file 1 "name" [, timestamp, size]
    expect_word("a file number");
    if (lex_.next().kind != PtxToken::string) error(lex_.peek(), "expected a file name");
    while (accept(",")) expect_word("a file attribute");
  }

  void skip_block(const PtxToken& open) {  // after '{'
    uint64_t depth = 1;
    while (depth > 0) {
      const PtxToken t = lex_.next();
      if (t.kind == PtxToken::end) error(open, "'{{' is never closed");
      if (t.is("{")) ++depth;
      if (t.is("}")) --depth;
    }
  }

  // Skips a kernel body (after its '{'), adding up the static shared memory its own `.shared`
  // declarations take (nvcc demotes a kernel's __shared__ variables into its body).
  uint32_t skip_body(const PtxToken& open) {
    uint64_t depth = 1, shared = 0;
    while (depth > 0) {
      const PtxToken t = lex_.next();
      if (t.kind == PtxToken::end) error(open, "'{{' is never closed");
      if (t.is("{")) ++depth;
      if (t.is("}")) --depth;
      if (t.is(".shared")) shared = add_shared_declaration(shared);
    }
    return static_cast<uint32_t>(std::min<uint64_t>(shared, UINT32_MAX));
  }

  // After `.shared` inside a body: `[.align N] .type name[dims];` placed after `offset`.
  uint64_t add_shared_declaration(uint64_t offset) {
    uint64_t align = 0, vec = 1;
    std::optional<ScalarType> type;
    while (lex_.peek().is_directive()) {
      const PtxToken d = lex_.next();
      if (d.is(".align")) {
        align = read_alignment();
      } else if (d.is(".v2") || d.is(".v4") || d.is(".v8")) {
        vec = d.text[2] - '0';
      } else if (auto s = scalar_type(d.text)) {
        type = s;
      }
    }
    const PtxToken name = lex_.peek();
    if (!type || name.kind != PtxToken::word) return offset;  // not a declaration we can size
    lex_.next();
    const std::optional<uint64_t> count = read_array_dims();
    if (!count) return offset;  // `extern` dynamic shared memory has no static size
    const uint64_t element = type->size * vec;
    if (align == 0) align = element;
    offset = (offset + align - 1) / align * align;
    return std::min<uint64_t>(offset + element * *count, uint64_t{1} << 48);
  }

  void skip_declaration(const PtxToken& first) {
    for (PtxToken t = first;; t = lex_.next()) {
      if (t.kind == PtxToken::end || t.is(";")) return;
      if (t.is("{")) return skip_block(t);
      if (t.is("}")) error(t, "unbalanced '}}'");
    }
  }

  void skip_parenthesised() {  // at '('
    const PtxToken open = lex_.next();
    if (!open.is("(")) error(open, "expected '('");
    int depth = 1;
    while (depth > 0) {
      const PtxToken t = lex_.next();
      if (t.kind == PtxToken::end) error(open, "'(' is never closed");
      depth += t.is("(") ? 1 : (t.is(")") ? -1 : 0);
    }
  }

  void read_dims(std::array<uint32_t, 3>& dims) {
    dims = {1, 1, 1};
    for (int i = 0; i < 3; ++i) {
      const uint64_t v = expect_uint("a dimension");
      dims[i] = static_cast<uint32_t>(std::min<uint64_t>(v, UINT32_MAX));
      if (!accept(",")) break;
    }
  }

  uint64_t read_alignment() {
    const PtxToken at = lex_.peek();
    const uint64_t a = expect_uint("an alignment");
    if (!std::has_single_bit(a) || a > 65536) error(at, "alignment {} is not a power of two up to 65536", a);
    return a;
  }

  // [n][m]... after a name; returns the element count (nullopt for an unsized []).
  std::optional<uint64_t> read_array_dims() {
    std::optional<uint64_t> count = 1;
    while (lex_.peek().is("[")) {
      const PtxToken open = lex_.next();
      if (accept("]")) {
        count = std::nullopt;
        continue;
      }
      const uint64_t n = expect_uint("an array size");
      expect("]");
      if (count) {
        if (n != 0 && *count > (uint64_t{1} << 48) / n) error(open, "array too large");
        *count *= n;
      }
    }
    return count;
  }

  void parse_entry(bool is_extern) {
    const PtxToken name = expect_word("a kernel name");
    if (name.is_directive()) error(name, "expected a kernel name, found '{}'", name.text);
    KernelInfo k;
    k.name = std::string(name.text);
    uint64_t offset = 0;
    if (accept("(")) {
      if (!accept(")")) {
        for (;;) {
          parse_param(k, offset);
          if (accept(")")) break;
          expect(",");
        }
      }
    }
    k.param_bytes = static_cast<uint32_t>(offset);
    // Performance directives until the body.
    while (lex_.peek().is_directive()) {
      const PtxToken d = lex_.next();
      if (d.is(".maxntid")) {
        read_dims(k.max_ntid);
      } else if (d.is(".reqntid")) {
        read_dims(k.req_ntid);
      } else if (d.is(".reqnctapercluster")) {
        read_dims(k.cluster_dims);
      } else if (d.is(".minnctapersm")) {
        k.min_blocks_per_sm = static_cast<uint32_t>(std::min<uint64_t>(expect_uint("a block count"), UINT32_MAX));
      } else if (d.is(".maxnreg")) {
        k.max_registers = static_cast<int>(std::min<uint64_t>(expect_uint("a register count"), 65535));
      } else if (d.is(".maxnctapersm") || d.is(".maxclusterrank")) {
        expect_uint("a count");
      } else if (d.is(".pragma")) {
        while (lex_.peek().kind == PtxToken::string || lex_.peek().is(",")) lex_.next();
        accept(";");
      }
      // Others (.noreturn, .explicitcluster, ...) carry no operand we need.
    }
    k.max_threads = product(k.max_ntid) != 0 ? product(k.max_ntid) : product(k.req_ntid);
    const PtxToken t = lex_.next();
    if (t.is("{")) {
      k.shared_bytes = skip_body(t);
      if (!is_extern && kernel_names_.insert(k.name).second) image_.kernels.push_back(std::move(k));
    } else if (!t.is(";")) {
      error(t, "expected the body of kernel {}", name.text);
    }
  }

  void parse_param(KernelInfo& k, uint64_t& offset) {
    const PtxToken p = lex_.next();
    if (!p.is(".param")) error(p, "expected .param in the parameters of {}", k.name);
    uint64_t align = 0, vec = 1;
    std::optional<ScalarType> type;
    bool pointer = false;
    while (lex_.peek().is_directive()) {
      const PtxToken d = lex_.next();
      if (d.is(".align")) {
        const uint64_t a = read_alignment();
        if (!pointer) align = a;  // after .ptr it is the pointee's alignment
      } else if (d.is(".ptr")) {
        pointer = true;
      } else if (d.is(".attribute")) {
        skip_parenthesised();
      } else if (d.is(".v2") || d.is(".v4") || d.is(".v8")) {
        vec = d.text[2] - '0';
      } else if (auto s = scalar_type(d.text)) {
        type = s;
      }
    }
    const PtxToken name = expect_word("a parameter name");
    const std::optional<uint64_t> count = read_array_dims();
    if (!type) error(name, "parameter {} has no type", name.text);
    if (!count) error(name, "parameter {} has no size", name.text);
    const uint64_t element = type->size * vec;
    const uint64_t size = element * *count;
    if (align == 0) align = element;
    offset = (offset + align - 1) / align * align;
    if (size > kMaxParamBlock || offset + size > kMaxParamBlock) error(name, "parameters of {} are too large", k.name);
    k.params.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
    offset += size;
  }

  void parse_variable(GlobalSpace space, bool is_extern) {
    const PtxToken start = lex_.peek();
    if (space == GlobalSpace::constant && lex_.peek().is("[")) {  // .const[bank] (old PTX)
      lex_.next();
      expect_uint("a constant bank");
      expect("]");
    }
    uint64_t vec = 1;
    std::optional<ScalarType> type;
    bool managed = false;
    while (lex_.peek().is_directive()) {
      const PtxToken d = lex_.next();
      if (d.is(".align")) {
        read_alignment();
      } else if (d.is(".attribute")) {
        expect("(");
        while (!accept(")")) {
          const PtxToken a = lex_.next();
          if (a.kind == PtxToken::end) error(start, "unterminated .attribute");
          managed |= a.is(".managed");
        }
      } else if (d.is(".v2") || d.is(".v4") || d.is(".v8")) {
        vec = d.text[2] - '0';
      } else if (auto s = scalar_type(d.text)) {
        type = s;
      } else if (d.is(".texref") || d.is(".samplerref") || d.is(".surfref")) {
        return skip_declaration(d);  // opaque handles, not memory
      }
    }
    if (!type) error(start, "variable declaration without a type");
    for (;;) {
      const PtxToken name = expect_word("a variable name");
      std::optional<uint64_t> count = read_array_dims();
      // Initial values are encoded as they are read: memory follows the text, not a count.
      std::vector<uint8_t> init;
      if (accept("=")) read_initializer(init, *type, 0);
      const uint64_t given = init.size() / type->size;
      if (!count) count = (given + vec - 1) / vec;  // unsized array: the initialiser counts
      const uint64_t elements = *count * vec;
      if (given > elements) error(name, "{} initialisers for {} elements of {}", given, elements, name.text);
      if (!is_extern && global_names_.insert(std::string(name.text)).second) {
        GlobalInfo g;
        g.name = std::string(name.text);
        g.size = elements * type->size;
        g.space = space;
        g.managed = managed;
        g.init = std::move(init);
        image_.globals.push_back(std::move(g));
      }
      if (accept(";")) return;
      expect(",");
    }
  }

  void read_initializer(std::vector<uint8_t>& out, ScalarType type, int depth) {
    const PtxToken t = lex_.next();
    if (depth > kMaxInitDepth) error(t, "initialiser nested too deeply");
    if (out.size() >= kMaxInitBytes) error(t, "initialiser too long");
    if (t.is("{")) {
      if (accept("}")) return;
      for (;;) {
        read_initializer(out, type, depth + 1);
        if (accept("}")) return;
        expect(",");
      }
    }
    bool negative = false;
    PtxToken v = t;
    if (v.is("-") || v.is("+")) {
      negative = v.is("-");
      v = lex_.next();
    }
    if (v.kind != PtxToken::word) error(v, "bad initialiser '{}'", v.text);
    Number value;
    if (auto n = parse_number(v.text)) {
      value = *n;
      if (negative) {
        value.bits = ~value.bits + 1;
        value.value = -value.value;
      }
    } else {
      // A symbol's address (name, generic(name), name+offset): unknown before placement, zero.
      if (lex_.peek().is("(")) skip_parenthesised();
      while (lex_.peek().is("+") || lex_.peek().is("-")) {
        lex_.next();
        expect_word("an address offset");
      }
    }
    append(out, value, type);
  }

  // Conversions that stay defined for any value a literal can hold.
  static int64_t to_int(double v) {
    if (!(v == v)) return 0;
    if (v >= 9.2e18) return INT64_MAX;
    if (v <= -9.2e18) return INT64_MIN;
    return static_cast<int64_t>(v);
  }
  static float to_float(double v) {
    if (v > 3.4028234663852886e38) return std::numeric_limits<float>::infinity();
    if (v < -3.4028234663852886e38) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(v);
  }

  // Appends one element of `type` holding `n` (little-endian).
  static void append(std::vector<uint8_t>& out, const Number& n, ScalarType type) {
    uint64_t bits = n.bits;
    if (type.cls == TypeClass::floating && type.size == 4) {
      const float f = n.is_float ? to_float(n.value) : static_cast<float>(static_cast<int64_t>(n.bits));
      bits = std::bit_cast<uint32_t>(f);
    } else if (type.cls == TypeClass::floating && type.size == 8) {
      bits = std::bit_cast<uint64_t>(n.is_float ? n.value : static_cast<double>(static_cast<int64_t>(n.bits)));
    } else if (n.is_float && type.cls == TypeClass::integer) {
      bits = static_cast<uint64_t>(to_int(n.value));
    }
    for (uint32_t b = 0; b < type.size; ++b) out.push_back(b < 8 ? static_cast<uint8_t>(bits >> (8 * b)) : 0);
  }

  PtxLexer lex_;
  ModuleImage image_;
  int target_ = 0;
  std::unordered_set<std::string> kernel_names_, global_names_;
};

}  // namespace

bool looks_like_ptx(std::string_view text) {
  try {
    PtxLexer lex(text);
    return lex.peek().is(".version");
  } catch (const ImageError&) {
    return false;
  }
}

ModuleImage parse_ptx(std::string_view text, int check_sm_arch) {
  PtxParser parser(text);
  ModuleImage image = parser.parse();
  if (check_sm_arch > 0 && image.sm_arch > check_sm_arch)
    fail_kind(ErrorKind::invalid_ptx, "PTX targets sm_{}, newer than sm_{}", image.sm_arch, check_sm_arch);
  return image;
}

}  // namespace vgpu::module
