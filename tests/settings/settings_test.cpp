// The settings registry (vgpu/common/settings.h): each type's parser, ranges, what a malformed
// value gives (one line naming the variable, the value and what is accepted; then the default),
// caching of `once` settings and re-reading of `each_use` ones.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/settings.h"
#include "common/settings_table.h"

namespace {

using namespace vgpu::settings;

Parsed parse_as(Id id, const char* value) { return parse(spec(id), value); }

// Sets `name` for one test and restores the registry's view afterwards.
class Env {
 public:
  Env(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
    reread_for_testing();
  }
  ~Env() {
    if (std::string(name_) != "VGPU_LOG_LEVEL") unsetenv(name_);
    reread_for_testing();
  }

 private:
  const char* name_;
};

TEST(SettingsParse, UnsetAndEmptyGiveTheDefault) {
  for (const char* v : {static_cast<const char*>(nullptr), ""}) {
    const Parsed p = parse_as(Id::measure_samples, v);
    EXPECT_FALSE(p.set);
    EXPECT_EQ(p.integer, 3);
    EXPECT_TRUE(p.complaint.empty());
  }
}

TEST(SettingsParse, Flags) {
  for (const char* yes : {"1", "true", "YES", "on", " on "}) {
    const Parsed p = parse_as(Id::nccl_direct, yes);
    EXPECT_TRUE(p.set) << yes;
    EXPECT_TRUE(p.flag) << yes;
  }
  for (const char* no : {"0", "false", "No", "off"}) EXPECT_FALSE(parse_as(Id::nccl_direct, no).flag) << no;
  EXPECT_TRUE(parse_as(Id::nccl_direct, nullptr).flag);  // default 1
  EXPECT_FALSE(parse_as(Id::trace, nullptr).flag);       // default 0
}

TEST(SettingsParse, IntegersAndTheirRange) {
  EXPECT_EQ(parse_as(Id::measure_samples, "1").integer, 1);
  EXPECT_EQ(parse_as(Id::measure_samples, "1000").integer, 1000);
  EXPECT_EQ(parse_as(Id::measure_samples, " 17 ").integer, 17);
  for (const char* bad : {"0", "1001", "-3", "3x", "x", "1e3", "99999999999999999999999"}) {
    const Parsed p = parse_as(Id::measure_samples, bad);
    EXPECT_FALSE(p.set) << bad;
    EXPECT_EQ(p.integer, 3) << bad;
    EXPECT_EQ(p.complaint, std::string("vgpu: VGPU_MEASURE_SAMPLES='") + bad +
                               "' is not an integer from 1 to 1000; using 3");
  }
  EXPECT_EQ(parse_as(Id::nccl_ring_bytes, "4096").integer, 4096);
  EXPECT_EQ(parse_as(Id::nccl_ring_bytes, "4095").integer, 1 << 20);
  EXPECT_EQ(parse_as(Id::shared_min_bytes, "0").integer, 0);  // 0: every allocation shared
}

TEST(SettingsParse, Reals) {
  EXPECT_DOUBLE_EQ(parse_as(Id::daemon_timeout_s, "2.5").real, 2.5);
  EXPECT_DOUBLE_EQ(parse_as(Id::daemon_timeout_s, "0").real, 0);
  EXPECT_DOUBLE_EQ(parse_as(Id::daemon_timeout_s, nullptr).real, 120);
  for (const char* bad : {"-1", "soon", "nan", "inf", "1s"}) {
    const Parsed p = parse_as(Id::daemon_timeout_s, bad);
    EXPECT_DOUBLE_EQ(p.real, 120) << bad;
    EXPECT_NE(p.complaint.find("is not a number from 0 to"), std::string::npos) << p.complaint;
  }
}

TEST(SettingsParse, ChoicesIgnoreCaseAndGiveTheDeclaredWord) {
  EXPECT_EQ(parse_as(Id::launch_policy, "FIRST").text, "first");
  EXPECT_EQ(parse_as(Id::launch_policy, nullptr).text, "all");
  const Parsed p = parse_as(Id::launch_policy, "some");
  EXPECT_EQ(p.text, "all");
  EXPECT_EQ(p.complaint, "vgpu: VGPU_LAUNCH_POLICY='some' is not one of all, first, none; using all");
}

TEST(SettingsParse, AnUnreadableLogLevelMeansWarn) {
  const Parsed p = parse_as(Id::log_level, "loud");
  EXPECT_EQ(p.text, "warn");
  EXPECT_NE(p.complaint.find("using warn"), std::string::npos) << p.complaint;
  EXPECT_EQ(parse_as(Id::log_level, nullptr).text, "off");
}

TEST(SettingsParse, IntegerLists) {
  const Parsed p = parse_as(Id::physical_devices, "0,3,1");
  EXPECT_TRUE(p.set);
  EXPECT_EQ(p.list, (std::vector<int64_t>{0, 3, 1}));
  for (const char* bad : {"0,,1", "0,x", "-1", "0,", "1024"}) {
    const Parsed q = parse_as(Id::physical_devices, bad);
    EXPECT_FALSE(q.set) << bad;
    EXPECT_TRUE(q.list.empty()) << bad;
    EXPECT_NE(q.complaint.find("comma-separated integers from 0 to 1023; using the default (unset)"),
              std::string::npos)
        << q.complaint;
  }
}

TEST(SettingsParse, TextAndPathsTakeAnyValue) {
  const Parsed p = parse_as(Id::job_id, "my job/1");
  EXPECT_TRUE(p.set);
  EXPECT_EQ(p.text, "my job/1");
  EXPECT_TRUE(p.complaint.empty());
  EXPECT_EQ(parse_as(Id::timeline, nullptr).text, "");
}

TEST(SettingsRegistry, EveryDefaultIsAValidValue) {
  for (const Spec& s : kSpecs) {
    if (s.default_value.empty()) continue;
    const Parsed p = parse(s, std::string(s.default_value).c_str());
    EXPECT_TRUE(p.complaint.empty()) << s.name << ": " << p.complaint;
  }
}

TEST(SettingsRegistry, NamesAreUniqueAndFound) {
  for (const Spec& s : kSpecs) {
    EXPECT_EQ(find(s.name), &s) << s.name;
    EXPECT_TRUE(s.name.starts_with("VGPU_")) << s.name;
    EXPECT_FALSE(s.meaning.empty()) << s.name;
    EXPECT_FALSE(s.readers.empty()) << s.name;
  }
  EXPECT_EQ(find("VGPU_NO_SUCH_THING"), nullptr);
}

TEST(SettingsAccess, AMalformedValueIsLoggedOnceWithTheDefaultUsed) {
  Env env("VGPU_NCCL_RING_BYTES", "12abc");
  testing::internal::CaptureStderr();
  const int64_t first = integer(Id::nccl_ring_bytes);
  const int64_t second = integer(Id::nccl_ring_bytes);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(first, 1 << 20);
  EXPECT_EQ(second, 1 << 20);
  const std::string line = "VGPU_NCCL_RING_BYTES='12abc' is not an integer from 4096 to 1 GiB; using 1048576";
  ASSERT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line), err.rfind(line)) << "logged twice: " << err;
}

TEST(SettingsAccess, AnEachUseValueIsLoggedOncePerDistinctValue) {
  Env env("VGPU_DAEMON_TIMEOUT_S", "never");
  testing::internal::CaptureStderr();
  EXPECT_DOUBLE_EQ(real(Id::daemon_timeout_s), 120);
  EXPECT_DOUBLE_EQ(real(Id::daemon_timeout_s), 120);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string line = "VGPU_DAEMON_TIMEOUT_S='never' is not a number from 0 to 1000000000; using 120";
  ASSERT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line), err.rfind(line)) << "logged twice: " << err;
}

// log.cpp reads VGPU_LOG_LEVEL quietly (its report is a log line itself); the report of an
// unreadable level comes with the next ordinary access of any setting.
TEST(SettingsAccess, AnUnreadableLogLevelIsReportedOnceLoggingCanRun) {
  Env env("VGPU_LOG_LEVEL", "chatty");
  testing::internal::CaptureStderr();
  EXPECT_EQ(text_quietly(Id::log_level), "warn");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  EXPECT_EQ(integer(Id::measure_samples), 3);
  EXPECT_EQ(integer(Id::measure_samples), 3);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string line = "VGPU_LOG_LEVEL='chatty' is not one of trace, debug, info, warn, warning, error, off; using warn";
  ASSERT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line), err.rfind(line)) << "logged twice: " << err;
  setenv("VGPU_LOG_LEVEL", "warn", 1);  // as the test environment had it
}

TEST(SettingsAccess, OnceSettingsAreCachedUntilReread) {
  Env env("VGPU_MEASURE_SAMPLES", "7");
  EXPECT_EQ(integer(Id::measure_samples), 7);
  setenv("VGPU_MEASURE_SAMPLES", "9", 1);
  EXPECT_EQ(integer(Id::measure_samples), 7);  // parsed once
  reread_for_testing();
  EXPECT_EQ(integer(Id::measure_samples), 9);
}

// Many threads reading a setting for the first time at once all get the value, parsed once
// (one complaint line; TSan checks the publication).
TEST(SettingsAccess, FirstUseFromManyThreads) {
  Env env("VGPU_NODE_INDEX", "70000");  // out of range: the default, 0, and one line
  testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  std::vector<int64_t> seen(8, -1);
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&seen, i] { seen[i] = integer(Id::node_index); });
  for (std::thread& t : threads) t.join();
  const std::string err = testing::internal::GetCapturedStderr();
  for (int64_t v : seen) EXPECT_EQ(v, 0);
  const std::string line = "VGPU_NODE_INDEX='70000' is not an integer from 0 to 65535; using 0";
  ASSERT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line), err.rfind(line)) << "logged twice: " << err;
}

TEST(SettingsAccess, EachUseSettingsSeeChanges) {
  Env env("VGPU_JOB_ID", "first-job");
  EXPECT_EQ(text(Id::job_id), "first-job");
  setenv("VGPU_JOB_ID", "second-job", 1);
  EXPECT_EQ(text(Id::job_id), "second-job");
}

TEST(SettingsAccess, IsSetAndRaw) {
  EXPECT_FALSE(is_set(Id::global_rank_gpu));
  EXPECT_EQ(raw(Id::nodes), nullptr);
  Env env("VGPU_GLOBAL_RANK_GPU", "5");
  EXPECT_TRUE(is_set(Id::global_rank_gpu));
  EXPECT_EQ(integer(Id::global_rank_gpu), 5);
  setenv("VGPU_NODES", "abc", 1);
  EXPECT_STREQ(raw(Id::nodes), "abc");  // the cluster config's own parser refuses it
  unsetenv("VGPU_NODES");
}

TEST(SettingsAccess, TheWrongTypeGivesZeroNotACrash) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(integer(Id::job_id), 0);
  EXPECT_FALSE(flag(Id::measure_samples));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("VGPU_JOB_ID is not read as its declared type"), std::string::npos) << err;
}

TEST(SettingsTable, MarkdownHasOneRowPerSetting) {
  const std::string table = markdown_table();
  for (const Spec& s : kSpecs)
    EXPECT_NE(table.find("| `" + std::string(s.name) + "` |"), std::string::npos) << s.name;
  EXPECT_NE(table.find("| `VGPU_MEASURE_SAMPLES` | an integer from 1 to 1000 | `3` |"), std::string::npos) << table;
}

TEST(SettingsTable, JsonNamesEverySetting) {
  const std::string json = json_table();
  for (const Spec& s : kSpecs)
    EXPECT_NE(json.find("\"name\": \"" + std::string(s.name) + "\""), std::string::npos) << s.name;
  EXPECT_EQ(json.front(), '[');
}

}  // namespace
