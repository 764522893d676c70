// The job's shared kernel durations (passthrough/shared_durations.h): what one process offers,
// another reads; the smallest offer wins; a file that is not the user's private table is refused.
#include "passthrough/shared_durations.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <cstdint>
#include <string>

using vgpu::pt::SharedDurations;

namespace {

std::string temp_path(const std::string& what) {
  return (std::filesystem::temp_directory_path() /
          ("vgpu_shared_durations_" + what + "_" + std::to_string(::getpid())))
      .string();
}

struct Removed {
  std::string path;
  ~Removed() { std::filesystem::remove(path); }
};

TEST(SharedDurations, AnotherProcessReadsTheSmallestOffer) {
  Removed f{temp_path("table")};
  auto t = SharedDurations::open(f.path);
  ASSERT_NE(t, nullptr);
  const uint64_t gemm = SharedDurations::key_of("gemm 128x256");
  const uint64_t copy = SharedDurations::key_of("copy 4 MiB");
  EXPECT_FALSE(t->smallest(gemm));
  t->offer(gemm, 2e-3);
  // A second process of the job (its own mapping of the file) offers less for one signature
  // and more for the other.
  const pid_t child = fork();
  if (child == 0) {
    auto mine = SharedDurations::open(f.path);
    if (mine == nullptr) _exit(2);
    if (!mine->smallest(gemm) || *mine->smallest(gemm) != 2e-3) _exit(3);
    mine->offer(gemm, 1.5e-3);
    mine->offer(copy, 40e-6);
    mine->offer(gemm, 1.8e-3);  // more than what it offered before: ignored
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(t->smallest(gemm));
  EXPECT_DOUBLE_EQ(*t->smallest(gemm), 1.5e-3);
  ASSERT_TRUE(t->smallest(copy));
  EXPECT_DOUBLE_EQ(*t->smallest(copy), 40e-6);
  t->offer(copy, 50e-6);
  EXPECT_DOUBLE_EQ(*t->smallest(copy), 40e-6);
  t->offer(copy, -1);  // nothing measured: ignored
  t->offer(copy, 0);
  EXPECT_DOUBLE_EQ(*t->smallest(copy), 40e-6);
}

TEST(SharedDurations, KeysCollideOnlyInTheTableNotInTheirValues) {
  Removed f{temp_path("probe")};
  auto t = SharedDurations::open(f.path);
  ASSERT_NE(t, nullptr);
  // Keys that land on the same slot probe onward and keep their own values.
  const uint64_t a = SharedDurations::kSlots * 3 + 5, b = SharedDurations::kSlots * 7 + 5;
  t->offer(a, 1e-3);
  t->offer(b, 2e-3);
  EXPECT_DOUBLE_EQ(*t->smallest(a), 1e-3);
  EXPECT_DOUBLE_EQ(*t->smallest(b), 2e-3);
  EXPECT_FALSE(t->smallest(SharedDurations::kSlots * 9 + 5));
  EXPECT_NE(SharedDurations::key_of(""), 0u);
  EXPECT_NE(SharedDurations::key_of("a"), SharedDurations::key_of("b"));
}

TEST(SharedDurations, KeysAreXxh64OfTheSignaturesBytes) {
  // Every process of the job must compute the same key for the same signature: the key is a
  // fixed function of the bytes, XXH64 with seed 0, checked against values made elsewhere (the
  // published XXH64 of "" and "abc"; the low 32 bits of a 403-byte signature's XXH64 are the
  // content checksum `zstd --check` wrote for those bytes, i * 37 + 11 modulo 256).
  EXPECT_EQ(SharedDurations::key_of(""), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(SharedDurations::key_of("abc"), 0x44BC2CF5AD770999ull);
  std::string signature(403, '\0');
  for (size_t i = 0; i < signature.size(); ++i) signature[i] = static_cast<char>((i * 37 + 11) % 256);
  EXPECT_EQ(static_cast<uint32_t>(SharedDurations::key_of(signature)), 0xa1cb22d5u);
  // Any byte of a long signature changes its key (the bulk lanes, the 8-byte tail and the last bytes).
  for (size_t i : {size_t{0}, size_t{31}, size_t{200}, size_t{390}, size_t{402}}) {
    std::string other = signature;
    other[i] = static_cast<char>(other[i] ^ 1);
    EXPECT_NE(SharedDurations::key_of(other), SharedDurations::key_of(signature)) << i;
  }
}

TEST(SharedDurations, RefusesWhatIsNotThisUsersPrivateTable) {
  // Readable by others: another user could have made it to feed this job durations.
  Removed open_to_all{temp_path("open")};
  { std::ofstream(open_to_all.path) << ""; }
  ASSERT_EQ(::chmod(open_to_all.path.c_str(), 0644), 0);
  EXPECT_EQ(SharedDurations::open(open_to_all.path), nullptr);
  // A symlink (to a file of the user's, even): not followed.
  Removed target{temp_path("target")}, link{temp_path("link")};
  ASSERT_NE(SharedDurations::open(target.path), nullptr);
  ASSERT_EQ(::symlink(target.path.c_str(), link.path.c_str()), 0);
  EXPECT_EQ(SharedDurations::open(link.path), nullptr);
  // A private file of another size: not a table of this build.
  Removed odd{temp_path("odd")};
  { std::ofstream(odd.path) << "not a table"; }
  ASSERT_EQ(::chmod(odd.path.c_str(), 0600), 0);
  EXPECT_EQ(SharedDurations::open(odd.path), nullptr);
  // A directory.
  Removed dir{temp_path("dir")};
  ASSERT_EQ(::mkdir(dir.path.c_str(), 0700), 0);
  EXPECT_EQ(SharedDurations::open(dir.path), nullptr);
}

}  // namespace
