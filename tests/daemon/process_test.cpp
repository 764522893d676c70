// vgpud as processes: the daemon binary (over the FakeEngine: fake_vgpud, the same main as
// vgpud) and rank processes (daemon_client_tool), as torchrun would run them. Covers start on
// demand (exactly one daemon for 8 simultaneous ranks), a rank killed mid-wait, garbage from a
// process, another uid, the daemon's idle exit, and a daemon that dies under its clients.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>

#include "child_process.h"
#include "daemon_fixture.h"
#include "job_paths.h"
#include "simcore/remote_engine.h"

#ifndef FAKE_VGPUD_PATH
#error "FAKE_VGPUD_PATH must name the fake_vgpud binary"
#endif
#ifndef CLIENT_TOOL_PATH
#error "CLIENT_TOOL_PATH must name the daemon_client_tool binary"
#endif

namespace simcore::testing {
namespace {

class DaemonProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    // Daemons started on demand are orphaned on purpose; as their subreaper this test can
    // reap them and see them exit.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    job_ = unique_job("proc");
    ASSERT_TRUE(daemon::job_paths(tmp_.path(), job_, &paths_, &err_)) << err_;
  }

  // The environment a rank process of this job gets.
  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"VGPU_JOB_ID=" + job_, "VGPU_DAEMON_DIR=" + tmp_.path(),
                                  std::string("VGPU_VGPUD=") + FAKE_VGPUD_PATH,
                                  "VGPU_DAEMON_IDLE_S=30"};
    e.insert(e.end(), extra.begin(), extra.end());
    return e;
  }
  RemoteOptions options(int rank = -1) const {
    RemoteOptions o;
    o.job_id = job_;
    o.socket_dir = tmp_.path();
    o.rank = rank;
    o.vgpud_path = FAKE_VGPUD_PATH;
    o.connect_timeout_s = 20;
    return o;
  }
  std::unique_ptr<Engine> connect(int rank = -1) const {
    std::string err;
    auto e = connect_engine(options(rank), &err);
    EXPECT_TRUE(e) << err;
    return e;
  }
  // A daemon started by the test itself (so it is our child).
  std::unique_ptr<Child> start_daemon(double idle_s = 30) {
    auto d = std::make_unique<Child>(
        std::vector<std::string>{FAKE_VGPUD_PATH, "--job", job_, "--socket-dir", tmp_.path(),
                                 "--idle-timeout", std::to_string(idle_s)});
    auto banner = d->line();
    EXPECT_TRUE(banner && banner->find("listening on") != std::string::npos)
        << (banner ? *banner : "no banner");
    return d;
  }
  void stop_daemon() {
    std::string err;
    EXPECT_TRUE(shutdown_daemon(options(), &err)) << err;
  }
  std::vector<pid_t> recorded_starts() const {
    std::ifstream in(starts_file());
    std::vector<pid_t> pids;
    for (pid_t p; in >> p;) pids.push_back(p);
    return pids;
  }
  std::string starts_file() const { return tmp_.path() + "/starts"; }

  // Reaps `pid` (our child, or an orphan we are subreaper of) once it has exited.
  static bool reaped(pid_t pid, double limit_s = 20) {
    return eventually([pid] {
      int st;
      const pid_t r = ::waitpid(pid, &st, WNOHANG);
      return r == pid || (r < 0 && errno == ECHILD);
    }, limit_s);
  }

  TempDir tmp_;
  std::string job_;
  daemon::JobPaths paths_;
  std::string err_;
};

TEST_F(DaemonProcess, EightRanksArrivingAtOnceStartExactlyOneDaemon) {
  std::vector<std::unique_ptr<Child>> ranks;
  for (int i = 0; i < 8; ++i)
    ranks.push_back(std::make_unique<Child>(
        std::vector<std::string>{CLIENT_TOOL_PATH, "add", std::to_string(1000 * (i + 1))},
        env({"FAKE_VGPUD_STARTS=" + starts_file()})));
  std::set<std::string> ids;
  for (auto& r : ranks) {
    auto l = r->line();
    ASSERT_TRUE(l);
    EXPECT_EQ(l->rfind("id ", 0), 0u) << *l;
    ids.insert(*l);
    EXPECT_TRUE(r->succeeds());
  }
  // One engine handed out eight different ids; eight daemons would each have said "id 1".
  EXPECT_EQ(ids.size(), 8u);
  const auto starts = recorded_starts();
  ASSERT_EQ(starts.size(), 1u) << "vgpud started " << starts.size() << " times";
  // A later rank finds the same daemon.
  Child late({CLIENT_TOOL_PATH, "add", "1"}, env({"FAKE_VGPUD_STARTS=" + starts_file()}));
  EXPECT_TRUE(late.succeeds());
  EXPECT_EQ(recorded_starts().size(), 1u);
  stop_daemon();
  EXPECT_TRUE(reaped(starts[0]));
  struct stat st {};
  EXPECT_NE(::stat(paths_.socket.c_str(), &st), 0);
}

TEST_F(DaemonProcess, EnsureDaemonStartsOneThatOthersThenJoin) {
  std::string err;
  RemoteOptions o = options();
  ASSERT_TRUE(ensure_daemon(o, &err)) << err;
  EXPECT_EQ(daemon_socket_path(o), paths_.socket);
  o.start_daemon = false;  // a rank that must not start one finds it
  auto e = connect_engine(o, &err);
  ASSERT_TRUE(e) << err;
  EXPECT_NE(e->add_task(TaskSpec{}), kNoEvent);
  ASSERT_TRUE(ensure_daemon(options(), &err)) << err;  // idempotent
  stop_daemon();
  o.connect_timeout_s = 0.2;
  EXPECT_FALSE(connect_engine(o, &err));
}

TEST_F(DaemonProcess, ProcessesAndThreadsWorkSideBySide) {
  auto d = start_daemon();
  std::vector<std::unique_ptr<Child>> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back(std::make_unique<Child>(
        std::vector<std::string>{CLIENT_TOOL_PATH, "work", std::to_string(r), "300"}, env()));
  auto local = connect(10);
  std::vector<std::future<bool>> threads;
  for (int t = 0; t < 4; ++t)
    threads.push_back(std::async(std::launch::async, [&, t] {
      for (int i = 0; i < 300; ++i) {
        TaskSpec k;
        k.duration = 0.5;
        k.not_before = t;
        const EventId id = local->add_task(k);
        const auto iv = local->query(id);
        if (!iv || iv->start != t || iv->finish != t + 0.5) return false;
      }
      return true;
    }));
  for (auto& r : ranks) {
    auto l = r->line();
    EXPECT_TRUE(l && *l == "ok 300") << (l ? *l : "no output");
    EXPECT_TRUE(r->succeeds());
  }
  for (auto& t : threads) EXPECT_TRUE(t.get());
  stop_daemon();
  EXPECT_TRUE(d->succeeds());
}

TEST_F(DaemonProcess, ARankKilledMidWaitIsUnregisteredAndNobodyElseNotices) {
  auto d = start_daemon();
  auto control = connect(0);
  control->register_rank(0);
  control->set_rank_floor(0, 100);
  Child holder({CLIENT_TOOL_PATH, "hold", "1"}, env());
  auto l = holder.line();
  ASSERT_TRUE(l && l->rfind("waiting ", 0) == 0) << (l ? *l : "no output");
  const EventId id = std::stoull(l->substr(8));
  // Rank 1 (floor 0) holds its own 1 s task back; our wait is parked behind it.
  EXPECT_FALSE(control->is_final(id));
  auto waiting = std::async(std::launch::async, [&] { return control->wait_final(id); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  ASSERT_EQ(::kill(holder.pid(), SIGKILL), 0);
  ASSERT_TRUE(holder.wait());
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const auto iv = waiting.get();
  ASSERT_TRUE(iv);
  EXPECT_EQ(iv->start, 0.0);
  EXPECT_EQ(iv->finish, 1.0);
  // The daemon and this client carry on.
  EXPECT_NE(control->add_task(TaskSpec{}), kNoEvent);
  Child another({CLIENT_TOOL_PATH, "work", "5", "20"}, env());
  EXPECT_TRUE(another.succeeds());
  stop_daemon();
  EXPECT_TRUE(d->succeeds());
}

TEST_F(DaemonProcess, AForkedChildDoesNotKeepADeadRankAlive) {
  auto d = start_daemon();
  auto control = connect(0);
  control->register_rank(0);
  control->set_rank_floor(0, 100);
  Child rank({CLIENT_TOOL_PATH, "fork-and-die", "3"}, env());
  auto l = rank.line();
  ASSERT_TRUE(l && l->rfind("waiting ", 0) == 0) << (l ? *l : "no output");
  std::istringstream in(l->substr(8));
  EventId id = 0;
  std::string word;
  pid_t child = -1;
  in >> id >> word >> child;
  ASSERT_GT(child, 0);
  EXPECT_TRUE(rank.succeeds());
  // The rank's process is gone; its forked child (still asleep) must not hold its connection.
  auto waiting = std::async(std::launch::async, [&] { return control->wait_final(id); });
  const bool released = waiting.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  ::kill(child, SIGKILL);
  reaped(child);
  ASSERT_TRUE(released) << "the forked child kept rank 3 registered";
  EXPECT_TRUE(waiting.get());
  stop_daemon();
  EXPECT_TRUE(d->succeeds());
}

TEST_F(DaemonProcess, AProcessSendingGarbageIsCutOffAlone) {
  auto d = start_daemon();
  auto good = connect(0);
  const EventId before = good->add_task(TaskSpec{});
  Child bad({CLIENT_TOOL_PATH, "garbage"}, env());
  EXPECT_EQ(bad.rest(), "error 1\neof\n");
  EXPECT_TRUE(bad.succeeds());
  EXPECT_TRUE(good->query(before));
  EXPECT_NE(good->add_task(TaskSpec{}), kNoEvent);
  stop_daemon();
  EXPECT_TRUE(d->succeeds());
}

TEST_F(DaemonProcess, AnotherUserCannotConnect) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid";
  auto d = start_daemon();
  {  // The directory (0700) keeps the other user out before the daemon even sees it.
    Child other({CLIENT_TOOL_PATH, "as-nobody"}, env());
    auto l = other.line();
    ASSERT_TRUE(l);
    EXPECT_EQ(l->rfind("refused: ", 0), 0u) << *l;
    EXPECT_NE(l->find("Permission denied"), std::string::npos) << *l;
  }
  {  // With the file permissions opened up, SO_PEERCRED still refuses the stranger.
    ASSERT_EQ(::chmod(tmp_.path().c_str(), 0755), 0);
    ASSERT_EQ(::chmod(paths_.socket.c_str(), 0666), 0);
    Child other({CLIENT_TOOL_PATH, "as-nobody"}, env());
    auto l = other.line();
    ASSERT_TRUE(l);
    EXPECT_EQ(l->rfind("refused: ", 0), 0u) << *l;
    EXPECT_NE(l->find("another user"), std::string::npos) << *l;
  }
  EXPECT_NE(connect(0)->add_task(TaskSpec{}), kNoEvent);  // the owner still gets in
  stop_daemon();
  EXPECT_TRUE(d->succeeds());
}

TEST_F(DaemonProcess, AnIdleDaemonExitsByItself) {
  auto d = start_daemon(0.3);
  {
    auto e = connect();
    EXPECT_NE(e->add_task(TaskSpec{}), kNoEvent);
  }
  ASSERT_TRUE(d->wait(20)) << "still running long after its last client left";
  EXPECT_TRUE(d->succeeds(0));
  struct stat st {};
  EXPECT_NE(::stat(paths_.socket.c_str(), &st), 0) << "socket file left behind";
  // The next rank starts a fresh one.
  EXPECT_NE(connect()->add_task(TaskSpec{}), kNoEvent);
  stop_daemon();
}

TEST_F(DaemonProcess, ADaemonKilledUnderItsClientsFailsTheirCallsPromptly) {
  auto d = start_daemon();
  auto e = connect(0);
  e->register_rank(0);
  const EventId id = e->add_task(TaskSpec{0, 0, 1.0, 0, {}, ""});
  auto waiting = std::async(std::launch::async, [&] { return e->wait_final(id); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(30)), std::future_status::timeout);
  ASSERT_EQ(::kill(d->pid(), SIGKILL), 0);
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_FALSE(waiting.get());
  auto later = std::async(std::launch::async, [&] {
    return e->add_flow(FlowSpec{}) == kNoEvent && !e->query(id) && !e->is_final(id) &&
           !e->wait_final(id) && e->timeline_json().empty();
  });
  ASSERT_EQ(later.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_TRUE(later.get());
}

// A daemon stopped (SIGSTOP) under a waiting client: the wait gives up within about a second,
// not after the call timeout (set to 10 minutes here), and the engine says why it is lost.
TEST_F(DaemonProcess, ADaemonStoppedUnderItsClientsIsNoticedNotWaitedOn) {
  auto d = start_daemon();
  RemoteOptions o = options(0);
  o.call_timeout_s = 600;
  std::string err;
  auto e = connect_engine(o, &err);
  ASSERT_TRUE(e) << err;
  e->register_rank(0);
  const EventId id = e->add_task(TaskSpec{0, 0, 1.0, 0, {}, ""});
  EXPECT_TRUE(e->lost().empty());
  ASSERT_EQ(::kill(d->pid(), SIGSTOP), 0);
  auto waiting = std::async(std::launch::async, [&] { return e->query(id); });
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_FALSE(waiting.get());
  EXPECT_NE(e->lost().find("stopped"), std::string::npos) << e->lost();
  ::kill(d->pid(), SIGCONT);
}

TEST_F(DaemonProcess, OneDaemonPerJob) {
  auto first = start_daemon();
  Child second({FAKE_VGPUD_PATH, "--job", job_, "--socket-dir", tmp_.path()});
  EXPECT_TRUE(second.succeeds());  // "already serves": a success, nothing to do
  EXPECT_NE(connect()->add_task(TaskSpec{}), kNoEvent);
  stop_daemon();
  EXPECT_TRUE(first->succeeds());
}

TEST_F(DaemonProcess, ADaemonThatCannotStartIsReportedNotRetriedForever) {
  Child rank({CLIENT_TOOL_PATH, "add", "1"},
             env({"FAKE_VGPUD_FAIL=no cluster config today", "FAKE_VGPUD_STARTS=" + starts_file()}));
  const std::string out = rank.rest();
  EXPECT_NE(out.find("exited at startup"), std::string::npos) << out;
  EXPECT_NE(out.find("no cluster config today"), std::string::npos) << out;
  EXPECT_FALSE(rank.succeeds());
  EXPECT_EQ(recorded_starts().size(), 1u);

  RemoteOptions o = options();
  o.vgpud_path = tmp_.path() + "/no-such-vgpud";
  std::string err;
  EXPECT_FALSE(connect_engine(o, &err));
  EXPECT_NE(err.find("no-such-vgpud"), std::string::npos) << err;
}

// The default runtime directory pre-created by another user (anyone can make /tmp/vgpu-<uid>):
// the ranks neither use nor wait on it; they agree on "<dir>.1", start one daemon there and get
// their simulated time from it.
TEST_F(DaemonProcess, ARuntimeDirectoryPlantedByAnotherUserIsSkipped) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to plant a directory as another user";
  const std::string runtime = tmp_.path() + "/xdg";
  ASSERT_EQ(::mkdir(runtime.c_str(), 0755), 0);
  const std::string planted = runtime + "/vgpu";
  ASSERT_EQ(::mkdir(planted.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 0777), 0);
  ASSERT_EQ(::chown(planted.c_str(), 65534, 65534), 0);
  const std::vector<std::string> rank_env = {
      "VGPU_JOB_ID=" + job_, "VGPU_DAEMON_DIR=", "XDG_RUNTIME_DIR=" + runtime,
      std::string("VGPU_VGPUD=") + FAKE_VGPUD_PATH, "VGPU_DAEMON_IDLE_S=30",
      "FAKE_VGPUD_STARTS=" + starts_file()};
  std::set<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    Child rank({CLIENT_TOOL_PATH, "add", "1000"}, rank_env);
    auto l = rank.line();
    ASSERT_TRUE(l);
    EXPECT_EQ(l->rfind("id ", 0), 0u) << *l;
    ids.insert(*l);
    EXPECT_TRUE(rank.succeeds());
  }
  EXPECT_EQ(ids.size(), 2u);  // one daemon served both
  EXPECT_EQ(recorded_starts().size(), 1u);
  struct stat s {};
  ASSERT_EQ(::lstat((runtime + "/vgpu.1").c_str(), &s), 0);
  EXPECT_EQ(s.st_uid, 0u);
  EXPECT_EQ(s.st_mode & 0777, 0700u);
  // Nothing was put into the planted directory.
  EXPECT_TRUE(std::filesystem::is_empty(planted));
  std::string err;
  daemon::JobPaths p;
  const char* saved_xdg = ::getenv("XDG_RUNTIME_DIR");
  const char* saved_dir = ::getenv("VGPU_DAEMON_DIR");
  const std::string xdg_before = saved_xdg ? saved_xdg : "", dir_before = saved_dir ? saved_dir : "";
  ::setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
  ::unsetenv("VGPU_DAEMON_DIR");
  const bool paths_ok = daemon::job_paths("", job_, &p, &err);
  saved_xdg ? ::setenv("XDG_RUNTIME_DIR", xdg_before.c_str(), 1) : ::unsetenv("XDG_RUNTIME_DIR");
  if (saved_dir) ::setenv("VGPU_DAEMON_DIR", dir_before.c_str(), 1);
  ASSERT_TRUE(paths_ok) << err;
  EXPECT_EQ(p.dir, runtime + "/vgpu.1");
  RemoteOptions o = options();
  o.socket_dir = p.dir;
  EXPECT_TRUE(shutdown_daemon(o, &err)) << err;
}

}  // namespace
}  // namespace simcore::testing
