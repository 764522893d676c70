// MD2, HMAC-MD2 and the runtime's integrity hash, as pure functions.
//
// Vectors: RFC 1319's MD2 test suite; ZLUDA's published step-by-step vectors of the integrity
// hash (each a 66-byte MD2 state before and after one step: the state is X[48], checksum[16],
// the filled count and the checksum's last byte); and end-to-end answers of the real driver
// (an H200 on driver 580, tests/darkapi/data/real_driver_probe_h200_580.txt), with every input
// the driver hashed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>

#include "front/export_tables/integrity.h"
#include "front/export_tables/md2.h"

using namespace vgpu::darkapi;

namespace {

std::string hex(std::span<const uint8_t> b) {
  std::string out;
  for (uint8_t x : b) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", x);
    out += two;
  }
  return out;
}

std::span<const uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Md2::State state_from(const std::array<uint8_t, 66>& raw) {
  Md2::State s;
  std::memcpy(&s, raw.data(), raw.size());
  return s;
}

std::array<uint8_t, 66> raw_of(const Md2::State& s) {
  std::array<uint8_t, 66> raw;
  std::memcpy(raw.data(), &s, raw.size());
  return raw;
}

}  // namespace

TEST(Md2, Rfc1319TestSuite) {
  EXPECT_EQ(hex(md2(bytes(""))), "8350e5a3e24c153df2275c9f80692773");
  EXPECT_EQ(hex(md2(bytes("a"))), "32ec01ec4a6dac72c0ab96fb34c0b5d1");
  EXPECT_EQ(hex(md2(bytes("abc"))), "da853b0d3f88d99b30283a69e6ded6bb");
  EXPECT_EQ(hex(md2(bytes("message digest"))), "ab4f496bfb2a530b219ff33031fe06b0");
  EXPECT_EQ(hex(md2(bytes("abcdefghijklmnopqrstuvwxyz"))), "4e8ddff3650292ab5a4108c3aa47940b");
  EXPECT_EQ(hex(md2(bytes("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"))),
            "da33def2a42df13975352846c30338cd");
  std::string digits;
  for (int i = 0; i < 8; ++i) digits += "1234567890";
  EXPECT_EQ(hex(md2(bytes(digits))), "d5976f79d83d3a0dc9806c3c66f3efd8");
}

TEST(Md2, IncrementalEqualsOneShotAcrossBlockBoundaries) {
  std::string msg(1000, '\0');
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<char>(i * 7 + 3);
  const Md2Digest whole = md2(bytes(msg));
  for (size_t cut : {1u, 15u, 16u, 17u, 500u, 999u}) {
    Md2 h;
    h.update(bytes(std::string_view(msg).substr(0, cut)));
    h.update(bytes(std::string_view(msg).substr(cut)));
    EXPECT_EQ(h.finish(), whole) << "cut at " << cut;
  }
  // finish() resets: the same object hashes the next message from scratch.
  Md2 h;
  h.update(bytes("garbage"));
  h.finish();
  h.update(bytes("abc"));
  EXPECT_EQ(hex(h.finish()), "da853b0d3f88d99b30283a69e6ded6bb");
}

TEST(HmacMd2, IsMd2OfPaddedKeysAroundTheInnerDigest) {
  // RFC 2104's definition written out with the MD2 primitive.
  const std::string key = "0123456789abcdef";
  const std::string msg = "what do ya want for nothing?";
  std::string ipad(16, '\0'), opad(16, '\0');
  for (size_t i = 0; i < 16; ++i) {
    ipad[i] = static_cast<char>(key[i] ^ 0x36);
    opad[i] = static_cast<char>(key[i] ^ 0x5c);
  }
  const Md2Digest inner = md2(bytes(ipad + msg));
  const Md2Digest expected =
      md2(bytes(opad + std::string(reinterpret_cast<const char*>(inner.data()), inner.size())));
  HmacMd2 mac(bytes(key));
  mac.update(bytes(msg.substr(0, 5)));
  mac.update(bytes(msg.substr(5)));
  EXPECT_EQ(mac.finish(), expected);
  // Reusable with the same key.
  mac.update(bytes(msg));
  EXPECT_EQ(mac.finish(), expected);
  // A short key is zero-padded; a long one is hashed first.
  HmacMd2 short_key(bytes("k"));
  HmacMd2 padded(bytes(std::string("k") + std::string(15, '\0')));
  short_key.update(bytes(msg));
  padded.update(bytes(msg));
  EXPECT_EQ(short_key.finish(), padded.finish());
  const std::string long_key(40, 'x');
  const Md2Digest hashed_key = md2(bytes(long_key));
  HmacMd2 from_long(bytes(long_key));
  HmacMd2 from_hash(hashed_key);
  from_long.update(bytes(msg));
  from_hash.update(bytes(msg));
  EXPECT_EQ(from_long.finish(), from_hash.finish());
}

// ZLUDA's vector: one byte (34) absorbed mid-block.
TEST(IntegrityVectors, ZludaSingleByteStep) {
  const std::array<uint8_t, 66> before = {
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x38, 0xc0, 0x9b, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xa3, 0x61, 0xe4, 0x42,
      0xf6, 0x67, 0x94, 0xff, 0x18, 0xc0, 0x9b, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xa4, 0x57,
      0x72, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  const std::array<uint8_t, 66> after = {
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x22, 0xc0, 0x9b, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xa3, 0x61, 0xe4, 0x42,
      0xf6, 0x67, 0x94, 0xff, 0x22, 0xc0, 0x9b, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0xa4, 0x57,
      0x72, 0xf7, 0xff, 0x7f, 0x00, 0x00, 0x57, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x57};
  Md2 h;
  h.set_state(state_from(before));
  h.update_byte(34);
  EXPECT_EQ(raw_of(h.state()), after);
}

// ZLUDA's vector: the HMAC key XOR 0x36 (the inner pad) absorbed into a fresh state.
TEST(IntegrityVectors, ZludaInnerKeyBlock) {
  const std::array<uint8_t, 66> expected = {
      0x8b, 0x21, 0x9a, 0x49, 0xe8, 0x6d, 0x1a, 0xee, 0xf2, 0x37, 0xf9, 0xb5, 0x4a, 0x8c,
      0x3c, 0x75, 0xc7, 0x1e, 0xee, 0x21, 0xcf, 0x29, 0x8a, 0xe5, 0x13, 0x83, 0xf4, 0xec,
      0x33, 0x04, 0xe2, 0xfd, 0xb0, 0x2f, 0x09, 0x01, 0x4f, 0xf7, 0x68, 0x6d, 0x69, 0x46,
      0x43, 0x7e, 0xb6, 0x2b, 0x21, 0xed, 0x57, 0xa1, 0x10, 0x86, 0x0e, 0x60, 0x44, 0x1e,
      0x70, 0x5f, 0x67, 0xd1, 0xeb, 0x67, 0xa1, 0x3d, 0x00, 0x3d};
  Md2 h;
  h.update_masked(kIntegrityKey, 0x36);
  EXPECT_EQ(raw_of(h.state()), expected);
}

// ZLUDA's vector: the packed record (captured from a CUDA 12.8 runtime) absorbed after the key.
TEST(IntegrityVectors, ZludaRecordStep) {
  const std::array<uint8_t, 66> before = {
      0x8b, 0x21, 0x9a, 0x49, 0xe8, 0x6d, 0x1a, 0xee, 0xf2, 0x37, 0xf9, 0xb5, 0x4a, 0x8c,
      0x3c, 0x75, 0xc7, 0x1e, 0xee, 0x21, 0xcf, 0x29, 0x8a, 0xe5, 0x13, 0x83, 0xf4, 0xec,
      0x33, 0x04, 0xe2, 0xfd, 0xb0, 0x2f, 0x09, 0x01, 0x4f, 0xf7, 0x68, 0x6d, 0x69, 0x46,
      0x43, 0x7e, 0xb6, 0x2b, 0x21, 0xed, 0x57, 0xa1, 0x10, 0x86, 0x0e, 0x60, 0x44, 0x1e,
      0x70, 0x5f, 0x67, 0xd1, 0xeb, 0x67, 0xa1, 0x3d, 0x00, 0x3d};
  const std::array<uint8_t, 66> after = {
      0x0a, 0xfd, 0xab, 0xc9, 0xff, 0x9b, 0xa0, 0xbe, 0x4d, 0x30, 0x32, 0x82, 0x74, 0x4f,
      0xa7, 0x48, 0x9d, 0x23, 0x82, 0xa3, 0x87, 0xfa, 0x6c, 0xdb, 0x92, 0x49, 0xd9, 0xb5,
      0x4b, 0x2b, 0x5e, 0x51, 0x6e, 0xf7, 0xf9, 0x4d, 0x28, 0x8a, 0x64, 0x06, 0x19, 0xb3,
      0xe6, 0xbe, 0xa4, 0xec, 0x7e, 0x54, 0x64, 0x28, 0xd9, 0xe1, 0xd4, 0x34, 0xc0, 0xa9,
      0x49, 0x88, 0xc9, 0x61, 0x58, 0xdd, 0x66, 0x74, 0x00, 0x74};
  IntegrityRecord r;
  r.driver_version = 0x2f30;
  r.version = 12082;
  r.process = 0x002fa423;
  r.thread = 0xf79c1000;
  r.cudart_table = reinterpret_cast<const void*>(0x00007ffff6958240);
  r.integrity_table = reinterpret_cast<const void*>(0x00007ffff6958220);
  r.function = reinterpret_cast<const void*>(0x00007ffff2aaf4a0);
  r.unix_seconds = 0x682b9cee;
  Md2 h;
  h.set_state(state_from(before));
  h.update(pack(r));
  EXPECT_EQ(raw_of(h.state()), after);
}

// ZLUDA's vector: one device entry (UUID given as four native-endian u32, PCI 0:2:0).
TEST(IntegrityVectors, ZludaDeviceStep) {
  const std::array<uint8_t, 66> before = {
      0x84, 0xfd, 0x93, 0x10, 0xc6, 0xdb, 0xb3, 0xbc, 0x49, 0xc2, 0x25, 0xe7, 0xda, 0x6e,
      0x22, 0x6f, 0x9b, 0xbd, 0x81, 0x59, 0xc3, 0x01, 0x9a, 0x7a, 0x26, 0x34, 0x39, 0x0f,
      0x2a, 0x56, 0x13, 0xb1, 0xf6, 0xbc, 0x7f, 0xa1, 0x8f, 0x04, 0xa5, 0x4d, 0x0d, 0x78,
      0xab, 0x20, 0xf8, 0x23, 0x20, 0xa5, 0x3f, 0x67, 0x36, 0xe2, 0xde, 0x8a, 0xe5, 0xdf,
      0xe1, 0xf2, 0x03, 0x94, 0xad, 0xdc, 0x9a, 0xda, 0x00, 0xda};
  const std::array<uint8_t, 66> after = {
      0x1f, 0xd8, 0x25, 0xd2, 0xdf, 0xfa, 0x64, 0xc7, 0xb6, 0x1a, 0xaf, 0x22, 0xb8, 0x79,
      0xfb, 0x96, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x7c, 0x9d, 0x46, 0xd2, 0x1f, 0xd8, 0x25, 0xd2, 0xdd, 0xfa, 0x64, 0xc7, 0xb6, 0x1a,
      0xaf, 0x22, 0xe6, 0x17, 0xbd, 0x3a, 0xd7, 0xdd, 0x5f, 0x82, 0x8c, 0x87, 0xce, 0x86,
      0x66, 0xaf, 0xa0, 0x50, 0x7a, 0x7d, 0xbb, 0xbc, 0x0c, 0x50};
  DeviceIdentity d;
  const uint32_t words[4] = {0x8a2bfe9au, 0x382d25acu, 0xc5ae37eau, 0x5f32716du};
  std::memcpy(d.uuid.data(), words, sizeof words);
  d.pci_domain = 0;
  d.pci_bus = 2;
  d.pci_device = 0;
  Md2 h;
  h.set_state(state_from(before));
  h.update(pack(d));
  EXPECT_EQ(raw_of(h.state()), after);
}

// ZLUDA's vector: padding and checksum from a state on a block boundary, and the digest.
TEST(IntegrityVectors, ZludaFinish) {
  const std::array<uint8_t, 66> before = {
      0x3e, 0x4b, 0xf2, 0x95, 0x71, 0xf5, 0x6b, 0x51, 0x07, 0xbf, 0x4b, 0xf1, 0x04, 0x0e,
      0x8e, 0x0b, 0x5f, 0x4d, 0x30, 0x0c, 0x0f, 0x0c, 0xae, 0xfb, 0x48, 0xaf, 0x23, 0xb5,
      0xea, 0x4c, 0xc2, 0xdb, 0xd7, 0xdf, 0x88, 0x74, 0x39, 0x58, 0x16, 0x3a, 0x1f, 0x7c,
      0x9b, 0x20, 0x7e, 0x7e, 0x94, 0xc8, 0x8b, 0xc6, 0xb2, 0x38, 0x0d, 0x07, 0x7d, 0xbd,
      0x90, 0xd5, 0x39, 0x63, 0xeb, 0x1d, 0x4f, 0x40, 0x00, 0x40};
  Md2 h;
  h.set_state(state_from(before));
  EXPECT_EQ(hex(h.finish()), "002353065e96f69c61aa962d2ecda858");
}

TEST(Integrity, PackedLayouts) {
  IntegrityRecord r;
  r.driver_version = 0x01020304;
  r.version = 13002;
  r.process = 7;
  r.thread = 0xdeadbeef;
  r.cudart_table = reinterpret_cast<const void*>(0x1111222233334444);
  r.integrity_table = reinterpret_cast<const void*>(0x5555666677778888);
  r.function = reinterpret_cast<const void*>(0x99990000aaaabbbb);
  r.unix_seconds = 0x0102030405060708;
  EXPECT_EQ(hex(pack(r)),
            "04030201" "ca320000" "07000000" "efbeadde" "4444333322221111" "8888777766665555"
            "bbbbaaaa00009999" "0807060504030201");
  DeviceIdentity d;
  for (int i = 0; i < 16; ++i) d.uuid[i] = static_cast<uint8_t>(i);
  d.pci_domain = 1;
  d.pci_bus = 0x18;
  d.pci_device = -1;
  EXPECT_EQ(hex(pack(d)), "000102030405060708090a0b0c0d0e0f" "01000000" "18000000" "ffffffff");
}

TEST(Integrity, VersionsEndingIn0And1AreFixedConstants) {
  IntegrityRecord r;
  r.unix_seconds = 12345;
  r.process = 99;
  for (uint32_t v : {13000u, 12080u, 10u}) {
    r.version = v;
    EXPECT_EQ(integrity_digest(r, {}), (IntegrityDigest{0x3341181c03cb675c, 0x8ed383aa1f4cd1e8}));
  }
  for (uint32_t v : {13001u, 12091u}) {
    r.version = v;
    EXPECT_EQ(integrity_digest(r, {}), (IntegrityDigest{0x1841181c03cb675c, 0x8ed383aa1f4cd1e8}));
  }
}

// The real driver's own answers (H200, driver 580, one device), with the inputs it hashed:
// recorded by tests/darkapi/real_driver_probe.cpp, where vgpu's implementation matched all.
TEST(Integrity, MatchesTheRealDriver) {
  IntegrityRecord r;
  r.driver_version = 13000;
  r.process = 446;
  r.thread = 0x7ac4c740;
  r.cudart_table = reinterpret_cast<const void*>(0x7f247a84c680);
  r.integrity_table = reinterpret_cast<const void*>(0x7f247a84c660);
  r.function = reinterpret_cast<const void*>(0x7f24751ab350);
  r.unix_seconds = 1795321626;
  DeviceIdentity d;
  const uint8_t uuid[16] = {0x16, 0xd2, 0x15, 0x06, 0x2e, 0x18, 0x04, 0x81,
                            0x34, 0xe3, 0x09, 0xce, 0xda, 0x98, 0xeb, 0x42};
  std::memcpy(d.uuid.data(), uuid, 16);
  d.pci_domain = 0;
  d.pci_bus = 0;
  d.pci_device = 6;
  const DeviceIdentity devices[] = {d};
  struct Case {
    uint32_t version;
    IntegrityDigest expected;
  };
  const Case cases[] = {
      {13002, {0xfc1976e4a715c94a, 0x8e954dfd43de5bd2}},
      {13003, {0xc56384a3ddf5659d, 0x7182632ed37f07ec}},
      {13009, {0xf4a3461826c85926, 0x1e7e892e17aa5d87}},
      {12082, {0x8557587a1ca189bf, 0x4494ab10ffbac328}},
      {12345, {0x5d42b533683c745b, 0x7099caadfdea12cb}},
  };
  for (const Case& c : cases) {
    r.version = c.version;
    EXPECT_EQ(integrity_digest(r, devices), c.expected) << "version " << c.version;
  }
  // Any input changes the answer.
  r.version = 13002;
  const IntegrityDigest base = integrity_digest(r, devices);
  IntegrityRecord other = r;
  other.thread ^= 1;
  EXPECT_NE(integrity_digest(other, devices), base);
  DeviceIdentity moved = d;
  moved.pci_bus = 1;
  const DeviceIdentity moved_devices[] = {moved};
  EXPECT_NE(integrity_digest(r, moved_devices), base);
  EXPECT_NE(integrity_digest(r, {}), base);
}
